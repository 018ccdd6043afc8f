"""A real job: audit the licenses and dependencies of the running Python environment.

Run it with ``converge run examples/dependency_audit/job.yaml``. Suggestors are in
:mod:`.suggestors`, the invariant and criteria (and what approving or rejecting a
``license.unknown`` gate means) in :mod:`.rules`, the policy (scope, forbidden and
allowed licenses) in :mod:`.policy`, the findings (violations, copyleft) in :mod:`.findings`, the
SPDX normalisation (with license-expression) in :mod:`.spdx`, the metadata reader
(with packaging) in :mod:`.distributions`.
"""

from examples.dependency_audit.distributions import (
    Distribution,
    closure,
    installed_distributions,
    normalise_name,
    parse_requirement,
    requirement_targets,
)
from examples.dependency_audit.extra import require_examples_extra
from examples.dependency_audit.findings import Finding, scan
from examples.dependency_audit.policy import Policy, policies
from examples.dependency_audit.rules import (
    AllClassified,
    NoForbiddenLicense,
    RisksAssessed,
    all_classified,
    all_classified_strict,
    no_forbidden_license,
    risks_assessed,
    spdx_value,
)
from examples.dependency_audit.spdx import classify, copyleft_strength, from_human, is_copyleft
from examples.dependency_audit.suggestors import (
    Inventory,
    audit_suggestors,
    copyleft_risk,
    dependencies,
    human_review,
    inventory,
    licenses,
)

# license-expression and packaging are imported where used; check them now, so a
# job fails as it loads with a hint naming the extra, not mid-run
require_examples_extra()

__all__ = [
    "AllClassified",
    "Distribution",
    "Finding",
    "Inventory",
    "NoForbiddenLicense",
    "Policy",
    "RisksAssessed",
    "all_classified",
    "all_classified_strict",
    "audit_suggestors",
    "classify",
    "closure",
    "copyleft_risk",
    "copyleft_strength",
    "dependencies",
    "from_human",
    "human_review",
    "installed_distributions",
    "inventory",
    "is_copyleft",
    "licenses",
    "no_forbidden_license",
    "normalise_name",
    "parse_requirement",
    "policies",
    "requirement_targets",
    "risks_assessed",
    "scan",
    "spdx_value",
]

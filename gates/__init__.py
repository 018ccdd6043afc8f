"""Decisions at a boundary: promotion validators, HITL gates and stop policies."""

from engine.hitl import GateDecision, HitlPolicy
from engine.promotion import PromotionGate, Rejection
from gates.hitl import ApprovalPolicy, require_approval
from gates.policies import (
    SPEC_TYPES,
    Continue,
    RunStats,
    StopConditionSpec,
    StopDecision,
    StopPolicy,
    apply_stop_conditions,
    load_stop_conditions,
    parse_stop_conditions,
    policies_from_specs,
)
from gates.promotion import CallableGate, ContentSchema, MinConfidence, promotion_gate

__all__ = [
    "SPEC_TYPES",
    "ApprovalPolicy",
    "CallableGate",
    "ContentSchema",
    "Continue",
    "GateDecision",
    "HitlPolicy",
    "MinConfidence",
    "PromotionGate",
    "Rejection",
    "RunStats",
    "StopConditionSpec",
    "StopDecision",
    "StopPolicy",
    "apply_stop_conditions",
    "load_stop_conditions",
    "parse_stop_conditions",
    "policies_from_specs",
    "promotion_gate",
    "require_approval",
]

"""The journey suite (issue 53, "where the parts meet"): random sequences of what
users do, driven through the real ``converge serve`` (its inbox and its pool of
worker processes), the JSON API, the pages and the real ``converge`` commands, with
what users rely on checked after every step (:mod:`tests.journeys.checks`).

- :mod:`tests.journeys.world`: one store, its people, jobs and first runs, the
  server, and the ways to act on them (HTTP, commands);
- :mod:`tests.journeys.streams`: run event streams followed by ``curl``;
- :mod:`tests.journeys.checks`: the invariants;
- :mod:`tests.journeys.test_journeys`: the hypothesis state machine over both stores.
"""

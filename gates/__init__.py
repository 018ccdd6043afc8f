"""Decisions at a boundary: promotion validators, HITL gates and stop policies."""

from engine.hitl import GateDecision, HitlPolicy
from engine.promotion import PromotionGate, Rejection
from gates.hitl import ApprovalPolicy, require_approval
from gates.promotion import CallableGate, ContentSchema, MinConfidence, promotion_gate

__all__ = [
    "ApprovalPolicy",
    "CallableGate",
    "ContentSchema",
    "GateDecision",
    "HitlPolicy",
    "MinConfidence",
    "PromotionGate",
    "Rejection",
    "promotion_gate",
    "require_approval",
]

"""The softmax ladder: registry.py (rungs and their configs), dispatch.py (plan and softmax())."""

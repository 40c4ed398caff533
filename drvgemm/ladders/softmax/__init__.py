"""The softmax ladder: registry.py (rungs and their configs), plan.py (which kernel and
constants run a shape, no GPU), dispatch.py (compiling and launching a plan, softmax())."""

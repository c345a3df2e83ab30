"""Front ends: models from other frameworks into Loom's forward IR.

:mod:`loom.frontend.torch` imports a PyTorch module through ``torch.export``.
"""

"""Model builders: configs in, forward IR (loss function) out.

``loom.models.llama`` builds Llama-style decoders (``build_forward``,
``CONFIGS``, ``LlamaConfig``); run it as ``python3 -m loom.models.llama``.
"""

__all__ = ["llama"]

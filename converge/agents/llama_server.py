"""``python -m converge.agents.llama_server ARGS``: llama-cpp-python's OpenAI-compatible
server (``python -m llama_cpp.server ARGS``) with llama.cpp's extra buffer types off.

llama.cpp repacks weights into "extra buffer types" for the CPU it runs on (AMX
tiles on CPUs that advertise ``amx_tile``); a llama-cpp-python built for one machine
faults in that path on another (a general protection fault at ``ldtilecfg`` in
``ggml_backend_amx_mul_mat``: the server dies on its first request). With
``use_extra_bufts`` off the plain CPU kernels run, on any x86-64 machine; for a model
the size of the packaged one (Gemma 3 270M) the repacking buys little.
"""

from __future__ import annotations

from typing import Any

__all__ = ["main", "portable_params"]


def portable_params(default: Any) -> Any:
    """``llama_model_default_params`` with the extra buffer types off."""

    def params() -> Any:
        made = default()
        made.use_extra_bufts = False
        return made

    return params


def main() -> None:
    """Run the server with the extra buffer types off (its arguments from ``sys.argv``)."""
    import llama_cpp.llama_cpp as native
    from llama_cpp.server.__main__ import main as serve

    native.llama_model_default_params = portable_params(native.llama_model_default_params)
    serve()  # type: ignore[no-untyped-call]  # llama-cpp-python ships no annotations here


if __name__ == "__main__":
    main()

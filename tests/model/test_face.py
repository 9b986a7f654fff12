"""The model room's face: every public name resolves lazily, without importing torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agent_kit.model


def test_every_name_of_the_face_resolves_to_its_defining_module() -> None:
    """Each name in ``__all__`` loads from the module that defines it."""
    for name in agent_kit.model.__all__:
        value = getattr(agent_kit.model, name)
        module = getattr(value, "__module__", None)
        if module is not None and module.startswith("agent_kit.model."):
            assert module.rsplit(".", 1)[1] in ("batch", "chat", "gguf", "loading", "lora", "turns")
    with pytest.raises(AttributeError):
        _ = agent_kit.model.no_such_name


@pytest.mark.e2e  # a fresh interpreter: a subprocess
def test_the_face_and_the_model_policies_import_without_torch() -> None:
    """Importing the face (all of its names), the ``hf``/``local`` policies and ``train``
    loads no torch, transformers or peft: the train extra stays optional."""
    code = (
        "import sys, agent_kit.model as m, agent_kit.emulator.policies.hf, "
        "agent_kit.emulator.policies.local_llm, agent_kit.train, agent_kit.train.samples; "
        "[getattr(m, n) for n in m.__all__]; "
        "print(','.join(x for x in ('torch', 'transformers', 'peft') if x in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

"""Loading the default model prints nothing: no progress bar interleaves with the run's lines."""

from __future__ import annotations

import pytest

from agent_kit.model.loading import load_model, parse_model_spec


@pytest.mark.e2e
def test_loading_the_packaged_gguf_model_prints_no_progress_bar(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The packaged SmolLM2 GGUF loads (de-quantised by transformers) without its tqdm bar or
    any other line on stdout or stderr."""
    loaded = load_model(parse_model_spec("smollm2-135m"), "cpu")
    assert loaded.model is not None
    out, err = capfd.readouterr()
    assert "de-quantizing" not in err
    assert (out, err) == ("", "")

"""The ``support`` template: `agent-kit new` offers the judged, simulated-customer agent."""

from __future__ import annotations

from pathlib import Path

from agent_kit.scaffold import project as scaffold

ROOT = Path(__file__).resolve().parents[2]


def test_the_support_template_is_offered_with_its_description() -> None:
    """``agent-kit templates`` lists ``support`` beside ``agent``, with its manifest's text."""
    found = {t.name: t for t in scaffold.list_templates()}
    assert {"agent", "support"} <= set(found)
    assert "judged" in found["support"].description


def test_the_support_template_renders_the_example_as_a_project(tmp_path: Path) -> None:
    """A rendered project holds the example's agent and policies, its dataset under data/, and
    names its own files in the docstring's run command."""
    made = scaffold.create_project("support", project_name="Help Desk", output_dir=tmp_path)
    root = made.path
    assert root.name == "help_desk"
    example = ROOT / "examples" / "support"
    assert (root / "policies.py").read_text() == (example / "policies.py").read_text()
    assert (root / "data" / "cases.jsonl").read_text() == (example / "cases.jsonl").read_text()
    agent = (root / "agent.py").read_text()
    assert "--dataset data/cases.jsonl" in agent
    assert "examples/support" not in agent
    assert "Help Desk" in (root / "README.md").read_text()


def test_the_rendered_agent_is_the_example_but_for_its_run_command(tmp_path: Path) -> None:
    """The rendered agent.py is examples/support/agent.py line for line, except the three lines
    of its docstring's run command (the template is a copy: this keeps the two in step)."""
    made = scaffold.create_project("support", project_name="Help Desk", output_dir=tmp_path)
    ours = (made.path / "agent.py").read_text().splitlines()
    example = (ROOT / "examples" / "support" / "agent.py").read_text().splitlines()
    assert len(ours) == len(example)
    differ = [i for i, (a, b) in enumerate(zip(ours, example, strict=True)) if a != b]
    assert len(differ) <= 3
    assert all("examples/support" in example[i] for i in differ)

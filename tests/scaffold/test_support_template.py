"""The ``support`` template: `agent-kit new` offers the judged, simulated-customer agent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

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


def _install_lines(readme: str) -> list[str]:
    return [line.strip() for line in readme.splitlines() if line.strip().startswith("pip install")]


@pytest.mark.e2e
def test_the_support_projects_install_steps_are_the_agent_templates(tmp_path: Path) -> None:
    """The support README and ``agent-kit new -t support``'s next steps install agent_kit the
    way the agent template does (from a checkout: it is not on a registry) and then the
    project's own ``[dev]`` extra, which declares agent_kit's judges extra and pytest; no step
    asks a registry for agent_kit."""
    support = scaffold.create_project("support", project_name="Help Desk", output_dir=tmp_path)
    agent = scaffold.create_project(output_dir=tmp_path / "agent")
    ours = _install_lines((support.path / "README.md").read_text())
    assert ours == _install_lines((agent.path / "README.md").read_text())
    assert ours == [ours[0], "pip install -e '.[dev]'"]
    assert "/path/to/agent_kit" in ours[0]
    installs = [s for s in support.next_steps if s.startswith("pip install")]
    assert installs
    assert all(s.startswith("pip install -e '.[dev]'") for s in installs)
    assert "agent_kit installed first" in installs[0]
    project = tomllib.loads((support.path / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("agent_kit[judges]") for d in project["dependencies"])
    assert any(d.startswith("pytest>=") for d in project["optional-dependencies"]["dev"])


@pytest.mark.e2e
def test_the_support_project_filters_warnings_as_the_agent_template(tmp_path: Path) -> None:
    """The rendered support project has the agent template's pytest settings (warnings are
    errors but for the known third-party one), and pytest reads them: collecting its tests
    with them passes."""
    support = scaffold.create_project("support", project_name="Help Desk", output_dir=tmp_path)
    agent = scaffold.create_project(output_dir=tmp_path / "agent")

    def pytest_settings(root: Path) -> dict[str, object]:
        text = (root / "pyproject.toml").read_text()
        return dict(tomllib.loads(text)["tool"]["pytest"]["ini_options"])

    assert pytest_settings(support.path) == pytest_settings(agent.path)
    assert (support.path / ".gitignore").read_text() == (agent.path / ".gitignore").read_text()
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider"],
        cwd=support.path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "test_the_agent_runs_offline_with_a_judged_reward" in collected.stdout
    assert "configfile: pyproject.toml" in collected.stdout


def _readme_run_line(readme: str) -> str:
    """The README's ``agent-kit run`` command, its continuation lines joined into one."""
    import re

    found = re.search(r"^agent-kit run (?:.*\\\n)*.*$", readme, re.M)
    assert found is not None
    return " ".join(found.group(0).replace("\\\n", " ").split())


def test_the_next_steps_run_line_is_the_readmes(tmp_path: Path) -> None:
    """``agent-kit new -t support``'s next steps run the project exactly as its README's run
    line does (``--success-threshold 1.5`` included)."""
    made = scaffold.create_project("support", project_name="Help Desk", output_dir=tmp_path)
    readme = _readme_run_line((made.path / "README.md").read_text())
    (step,) = [s for s in made.next_steps if s.startswith("agent-kit run")]
    assert " ".join(step.split("#")[0].split()) == readme
    assert "--success-threshold 1.5" in readme

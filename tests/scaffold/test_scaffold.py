"""Scaffolding: the ``agent`` cookiecutter template, agent_kit.scaffold.project and ``agent-kit
new``."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
import tomllib
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import agent_kit
from agent_kit.cli import app, main
from agent_kit.cli.run_options import key_values
from agent_kit.errors import TemplateError, UsageError
from agent_kit.scaffold import project as scaffold

REPO = Path(agent_kit.__file__).resolve().parent.parent
TEMPLATE_DIR = REPO / "templates" / "agent"
VENV_BIN = Path(sys.executable).parent

EXPECTED_FILES = {
    ".gitignore",
    ".python-version",
    "README.md",
    "agent.py",
    "agentcore/.gitignore",
    "agentcore/agentcore.json",
    "agentcore/aws-targets.json",
    "data/holdout.jsonl",
    "data/train.jsonl",
    "policies.py",
    "pyproject.toml",
    "requirements.txt",
    "tests/conftest.py",
    "tests/test_golden.py",
    "tests/test_replay.py",
    "tests/test_reward.py",
    "tests/test_smoke.py",
    f"vendor/agent_kit-{agent_kit.__version__}-py3-none-any.whl",
}


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative POSIX path → content), caches excluded."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def clean_env(home: Path) -> dict[str, str]:
    """A subprocess environment without the caller's venv, config or Python path leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COOKIECUTTER", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    env["HOME"] = str(home)
    return env


def run_plain_cookiecutter(
    out: Path, home: Path, assignments: Mapping[str, str] = {}
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``cookiecutter`` console script on templates/agent without prompts."""
    return subprocess.run(
        [
            str(VENV_BIN / "cookiecutter"),
            str(TEMPLATE_DIR),
            "--no-input",
            "--output-dir",
            str(out),
            *(f"{k}={v}" for k, v in assignments.items()),
        ],
        env=clean_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# -- template discovery --------------------------------------------------------------------


def test_templates_are_listed_with_their_description() -> None:
    """The repository's agent template is listed with the description from its manifest."""
    found = {t.name: t for t in scaffold.list_templates()}
    assert "agent" in found
    manifest = json.loads((TEMPLATE_DIR / "cookiecutter.json").read_text())
    assert found["agent"].description == manifest["_description"]
    assert found["agent"].path == TEMPLATE_DIR
    assert "runtime_name" in found["agent"].variables()
    assert not any(v.startswith("_") for v in found["agent"].variables())


def test_wheel_layout_templates_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a wheel install the templates come from ``agent_kit/_templates`` beside the package."""
    package = tmp_path / "site-packages" / "agent_kit"
    shutil.copytree(TEMPLATE_DIR, package / "_templates" / "agent")
    monkeypatch.setattr(scaffold, "__file__", str(package / "scaffold" / "project.py"))
    assert scaffold.template_roots() == [package / "_templates"]
    assert scaffold.find_template("agent").path == package / "_templates" / "agent"


def test_template_by_path_and_unknown_name(tmp_path: Path) -> None:
    """A directory holding cookiecutter.json is a template; anything else is a clear error."""
    assert scaffold.find_template(str(TEMPLATE_DIR)).path == TEMPLATE_DIR
    with pytest.raises(TemplateError, match=r"unknown template 'nope'.*available: agent"):
        scaffold.find_template("nope")
    with pytest.raises(TemplateError, match=r"not a directory containing cookiecutter\.json"):
        scaffold.find_template(str(tmp_path))


# -- rendering -----------------------------------------------------------------------------


def test_defaults_render_a_complete_project(tmp_path: Path) -> None:
    """Defaults render the full project: valid Python, MTRL dataset, entrypoint contract, TODOs."""
    project = scaffold.create_project(output_dir=tmp_path)
    assert project.path == tmp_path / "my_agent"
    files = tree(project.path)
    assert set(files) == EXPECTED_FILES
    for name, content in files.items():
        if name.endswith(".py"):
            ast.parse(content, filename=name)
    agent_src = files["agent.py"].decode()
    module = ast.parse(agent_src)
    classes = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    methods = {n.name for n in classes["TaskEnv"].body if isinstance(n, ast.FunctionDef)}
    assert {"reset", "guess"} <= methods
    assert "app = RolloutApp(" in agent_src
    assert agent_src.rstrip().endswith('if __name__ == "__main__":\n    app.run()')
    assert "Reward.weighted(outcome=" in agent_src
    assert "# TODO:" in agent_src
    assert "TODO" in files["policies.py"].decode()
    pyproject = files["pyproject.toml"].decode()  # (installing it in the e2e test parses it)
    for line in ('name = "my_agent"', '  "agent_kit>=0.4",', 'requires-python = ">=3.10"'):
        assert any(text.startswith(line) for text in pyproject.splitlines()), line
    wheel = f"vendor/agent_kit-{agent_kit.__version__}-py3-none-any.whl"
    assert tomllib.loads(pyproject)["tool"]["uv"]["sources"]["agent_kit"] == {"path": wheel}
    spec = json.loads(files["agentcore/agentcore.json"])
    assert spec["name"] == "myagent"
    assert spec["runtimes"] == [
        {
            "name": "my_agent",
            "build": "CodeZip",
            "entrypoint": "agent.py",
            "codeLocation": "./",
            "runtimeVersion": "PYTHON_3_11",
            "networkMode": "PUBLIC",
            "protocol": "HTTP",
        }
    ]
    assert json.loads(files["agentcore/aws-targets.json"]) == []
    for split in ("train", "holdout"):
        lines = files[f"data/{split}.jsonl"].decode().splitlines()
        assert len(lines) >= 8
        for line in lines:
            row = json.loads(line)
            assert list(row) == ["prompt"]
            task = json.loads(row["prompt"])
            assert {"id", "low", "high", "secret", "max_guesses"} <= set(task)
            assert task["low"] <= task["secret"] <= task["high"]
    readme = files["README.md"].decode()
    for command in (
        "pip install -e '.[dev]'",
        "pytest",
        "agent-kit run agent.py --dataset data/train.jsonl --policy scripted:policies.py:",
        "agent-kit deploy",
    ):
        assert command in readme
    assert project.next_steps[0] == f"cd {project.path}"


def test_readme_lists_every_shipped_test_and_warnings_are_errors(tmp_path: Path) -> None:
    """The generated README names every test file and test function the project ships (so a
    new user knows what `pytest` checks), and its pytest runs with warnings as errors."""
    project = scaffold.create_project(output_dir=tmp_path)
    readme = (project.path / "README.md").read_text(encoding="utf-8")
    shipped = sorted((project.path / "tests").glob("test_*.py"))
    assert shipped
    for path in shipped:
        assert f"`tests/{path.name}`" in readme, path.name
        names = [
            n.name
            for n in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
        ]
        assert names, path.name
        for name in names:
            assert f"`{name}`" in readme, f"{path.name}::{name}"
    assert "## The two commands" in readme
    pytest_ini = tomllib.loads((project.path / "pyproject.toml").read_text(encoding="utf-8"))
    assert pytest_ini["tool"]["pytest"]["ini_options"]["filterwarnings"][0] == "error"


#: The agent_kit extra each `agent-kit` command of a generated README needs beyond the core.
COMMAND_EXTRAS: Mapping[str, str] = {"package": "deploy", "deploy": "deploy", "export": "mlflow"}


def _readme_commands(readme: str) -> list[str]:
    """The shell commands of a README's ```bash blocks (continuations joined, comments out)."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.DOTALL):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def _closure(requirements: list[str], ours: Mapping[str, list[str]]) -> set[str]:
    """The names of ``requirements`` and, for ``agent_kit[extra]``, of the extra's own
    requirements (agent_kit's pyproject ``ours``), recursively; names normalised."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    names: set[str] = set()
    todo = list(requirements)
    while todo:
        req = Requirement(todo.pop())
        name = canonicalize_name(req.name)
        if name in names and not req.extras:
            continue
        names.add(name)
        if name == canonicalize_name("agent_kit"):
            for extra in req.extras:
                todo.extend(ours[extra])
    return names


def test_readme_install_step_declares_what_its_later_steps_use(tmp_path: Path) -> None:
    """Every tool the generated README's steps run after its `pip install` step is declared
    by what that step installs: pytest, and the agent_kit extra of each `agent-kit` command
    (uv for `package`), so no step fails with "`uv` is needed"."""
    from packaging.utils import canonicalize_name

    project = scaffold.create_project(output_dir=tmp_path)
    commands = _readme_commands((project.path / "README.md").read_text(encoding="utf-8"))
    ours = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    theirs = tomllib.loads((project.path / "pyproject.toml").read_text())["project"]
    installs = [c for c in commands if c.startswith("pip install")]
    assert installs, commands
    declared: list[str] = []
    for command in installs:
        for word in shlex.split(command)[2:]:
            if word.startswith("-"):
                continue
            target, _, extras = word.partition("[")
            wanted = [e for e in extras.rstrip("]").split(",") if e]
            if target == ".":  # this project: its dependencies and the extras asked for
                declared += theirs["dependencies"]
                for extra in wanted:
                    declared += theirs["optional-dependencies"][extra]
            else:  # agent_kit from a checkout
                declared.append(f"agent_kit[{','.join(wanted)}]" if wanted else "agent_kit")
    have = _closure(declared, ours["optional-dependencies"])
    later = commands[commands.index(installs[-1]) + 1 :]
    needed = set()
    for command in later:
        words = shlex.split(command)
        if words[0] == "pytest":
            needed.add("pytest")
        elif words[0] == "agent-kit":
            needed.add("agent_kit")
            extra = COMMAND_EXTRAS.get(words[1])
            if extra is not None:
                needed |= _closure(ours["optional-dependencies"][extra], {})
    assert "uv" in needed  # the README does package the agent
    missing = {canonicalize_name(n) for n in needed} - have
    assert not missing, f"used by the README's steps but not installed by them: {missing}"


def test_generated_project_is_lint_clean(tmp_path: Path) -> None:
    """The rendered Python passes ruff's checks (bugbear, pyupgrade, isort, …) and its formatter."""
    project = scaffold.create_project(output_dir=tmp_path)
    ruff = str(VENV_BIN / "ruff")
    rules = "E,F,W,I,B,UP,C4,SIM,RUF,PT,RET,PIE"
    for args in (["check", "--select", rules], ["format", "--check"]):
        done = subprocess.run(
            [ruff, *args, "--isolated", "--line-length", "100", "."],
            cwd=project.path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_plain_cookiecutter_renders_the_same_tree(tmp_path: Path) -> None:
    """``cookiecutter templates/agent --no-input`` and ``create_project()`` give identical trees."""
    ours = scaffold.create_project(output_dir=tmp_path / "ours")
    done = run_plain_cookiecutter(tmp_path / "plain", tmp_path / "home")
    assert done.returncode == 0, done.stderr
    plain = tmp_path / "plain" / "my_agent"
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["my_agent"]
    wheel = f"vendor/agent_kit-{agent_kit.__version__}-py3-none-any.whl"
    ours_tree = tree(ours.path)
    assert ours_tree.pop(wheel)  # only agent-kit new writes the runtime wheel
    assert tree(plain) == ours_tree


def test_template_names_the_running_agent_kit_wheel() -> None:
    """The template's default ``_agent_kit_version`` is agent_kit's version, so a project that
    plain cookiecutter renders names the wheel ``agent-kit new`` would write."""
    manifest = json.loads((TEMPLATE_DIR / "cookiecutter.json").read_text())
    assert manifest["_agent_kit_version"] == agent_kit.__version__
    assert manifest["_runtime_wheel_dir"] == "vendor"


def test_variables_reach_every_file(tmp_path: Path) -> None:
    """Custom class, tool, runtime and limit values appear wherever the template uses them."""
    project = scaffold.create_project(
        project_name="Number Hunter",
        output_dir=tmp_path,
        extra_context={
            "environment_class": "HuntEnv",
            "tool_name": "probe",
            "max_turns": "9",
            "group_size": "8",
            "aws_region": "eu-central-1",
            "python_version": "3.12",
            "runtime_name": "hunter_rt",
        },
    )
    assert project.path.name == "number_hunter"
    assert project.context["runtime_name"] == "hunter_rt"
    files = {k: v.decode() for k, v in tree(project.path).items() if not k.endswith(".whl")}
    module = ast.parse(files["agent.py"])
    env_class = next(n for n in module.body if isinstance(n, ast.ClassDef))
    assert env_class.name == "HuntEnv"
    assert "probe" in {n.name for n in env_class.body if isinstance(n, ast.FunctionDef)}
    assert "MAX_TURNS = 9" in files["agent.py"]
    assert 'TOOL = "probe"' in files["policies.py"]
    assert "from agent import HuntEnv, reward" in files["tests/test_reward.py"]
    assert "--name hunter_rt --region eu-central-1" in files["README.md"]
    assert "--group-size 8" in files["README.md"]
    assert files[".python-version"].strip() == "3.12"
    (runtime,) = json.loads(files["agentcore/agentcore.json"])["runtimes"]
    assert (runtime["name"], runtime["runtimeVersion"]) == ("hunter_rt", "PYTHON_3_12")
    for name in ("agent.py", "policies.py", "tests/test_golden.py", "tests/test_reward.py"):
        assert not re.search(r"\bguess\b", files[name]), name  # the default tool name is gone


def test_derived_slug_and_runtime_name(tmp_path: Path) -> None:
    """The slug and runtime name derive from the project name: lower-case, underscores."""
    context = scaffold.resolve_context(
        scaffold.find_template("agent"), {"project_name": "Ticket Triage-Bot"}
    )
    assert context["project_slug"] == "ticket_triage_bot"
    assert context["runtime_name"] == "ticket_triage_bot"


# -- bad variables -------------------------------------------------------------------------

BAD_VARIABLES = [
    pytest.param({"project_slug": "my agent"}, "project_slug 'my agent'", id="slug-with-space"),
    pytest.param({"runtime_name": "my-agent"}, "runtime_name 'my-agent'", id="runtime-hyphen"),
    pytest.param({"project_name": "42 Agents"}, "project_slug '42_agents'", id="slug-digit"),
    pytest.param({"environment_class": "task_env"}, "environment_class", id="class-lower"),
    pytest.param({"tool_name": "reset"}, "tool_name 'reset' clashes", id="tool-reserved"),
    pytest.param({"tool_name": "__init__"}, "tool_name '__init__' is not valid", id="dunder"),
    pytest.param({"tool_name": "_attach"}, "starts with a letter", id="tool-private"),
    pytest.param({"tool_name": "__class__"}, "starts with a letter", id="tool-class"),
    pytest.param({"max_turns": "0"}, "max_turns is 0", id="turns-zero"),
    pytest.param({"group_size": "many"}, "group_size 'many' is not a whole number", id="group"),
    pytest.param({"aws_region": "uswest2"}, "aws_region 'uswest2'", id="region"),
    pytest.param({"python_version": "3.9"}, "python_version '3.9'", id="python"),
    pytest.param({"agent_description": 'Say "hi"'}, "double quotes", id="description-quote"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_VARIABLES)
def test_bad_variables_are_refused_before_writing(
    tmp_path: Path, overrides: dict[str, str], message: str
) -> None:
    """A bad variable raises TemplateError naming it, and nothing is written to the output dir."""
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(TemplateError, match="invalid template variables") as caught:
        scaffold.create_project(output_dir=out, extra_context=overrides)
    assert message in caught.value.message
    assert list(out.iterdir()) == []


def test_every_environment_attribute_is_a_reserved_tool_name() -> None:
    """The template refuses a tool_name equal to any attribute an Environment has (public ones
    by name; private and dunder ones because a tool name must start with a letter)."""
    from agent_kit import Environment

    template = scaffold.find_template("agent")
    defaults = scaffold.resolve_context(template)
    for name in dir(Environment):
        with pytest.raises(TemplateError, match=re.escape(f"tool_name {name!r}")):
            scaffold.validate_context(template, {**defaults, "tool_name": name})


@pytest.mark.parametrize(
    "overrides",
    [
        {"project_slug": "my agent", "runtime_name": "my-agent"},
        {"max_turns": "500", "aws_region": "mars", "tool_name": "class"},
    ],
)
def test_plain_cookiecutter_hook_reports_the_same_problems(
    tmp_path: Path, overrides: dict[str, str]
) -> None:
    """Plain cookiecutter's hook fails with the messages agent_kit gives, and leaves nothing."""
    with pytest.raises(TemplateError) as caught:
        scaffold.create_project(output_dir=tmp_path / "ours", extra_context=overrides)
    expected = [line.strip() for line in caught.value.message.splitlines()[1:]]
    assert expected
    done = run_plain_cookiecutter(tmp_path / "plain", tmp_path / "home", overrides)
    assert done.returncode != 0
    for line in expected:
        assert line in done.stderr
    assert list((tmp_path / "plain").iterdir()) == []


@settings(max_examples=25, deadline=None)
@given(name=st.text(min_size=0, max_size=40))
def test_any_project_name_renders_valid_python_or_is_refused(name: str) -> None:
    """Any project name either renders a project whose Python parses, or is refused cleanly."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        try:
            project = scaffold.create_project(project_name=name, output_dir=out)
        except TemplateError as exc:
            refusal = exc.message
        else:
            refusal = ""
        if refusal:
            assert list(out.iterdir()) == []
            return
        for path in project.path.rglob("*.py"):
            ast.parse(path.read_text(), filename=str(path))
        assert name in (project.path / "README.md").read_text()


def test_unknown_variable_and_bad_assignment_are_refused(tmp_path: Path) -> None:
    """An unknown ``-x`` key is a TemplateError listing the known keys; an item without ``=`` is
    a UsageError, and a later key overrides an earlier one."""
    with pytest.raises(TemplateError, match=r"unknown template variable\(s\) colour.*tool_name"):
        scaffold.create_project(output_dir=tmp_path, extra_context={"colour": "red"})
    with pytest.raises(UsageError, match="expected key=value"):
        key_values(["tool_name"], "expected key=value")
    assert key_values(["a=1", "b=x=y", "a=2"], "") == {"a": "2", "b": "x=y"}
    assert list(tmp_path.iterdir()) == []


def test_existing_directory_is_refused_unless_forced(tmp_path: Path) -> None:
    """An existing target is left untouched; --force re-renders template files, keeps others."""
    first = scaffold.create_project(output_dir=tmp_path)
    (first.path / "agent.py").write_text("edited")
    (first.path / "notes.txt").write_text("mine")
    with pytest.raises(TemplateError, match=r"already exists.*--force"):
        scaffold.create_project(output_dir=tmp_path)
    assert (first.path / "agent.py").read_text() == "edited"
    scaffold.create_project(output_dir=tmp_path, force=True)
    assert (first.path / "agent.py").read_text().startswith('"""My Agent')
    assert (first.path / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_agent"]


def test_force_never_writes_through_a_symlink(tmp_path: Path) -> None:
    """--force over a project whose files or folders are symlinks refuses, naming them, and
    leaves the files the links point at (outside the project) untouched."""
    first = scaffold.create_project(output_dir=tmp_path / "out")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("keep me")
    (outside / "tests").mkdir()
    (outside / "tests" / "test_smoke.py").write_text("mine")
    (first.path / "agent.py").unlink()
    (first.path / "agent.py").symlink_to(outside / "secret.txt")
    shutil.rmtree(first.path / "tests")
    (first.path / "tests").symlink_to(outside / "tests")
    with pytest.raises(TemplateError, match="symlink") as caught:
        scaffold.create_project(output_dir=tmp_path / "out", force=True)
    assert "agent.py" in caught.value.message
    assert "tests" in caught.value.message
    assert (outside / "secret.txt").read_text() == "keep me"
    assert [p.name for p in (outside / "tests").iterdir()] == ["test_smoke.py"]
    assert (outside / "tests" / "test_smoke.py").read_text() == "mine"


def test_force_refuses_a_target_that_is_a_symlink(tmp_path: Path) -> None:
    """--force onto a project directory that is itself a symlink refuses and writes nothing."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "my_agent").symlink_to(elsewhere)
    with pytest.raises(TemplateError, match="symlink"):
        scaffold.create_project(output_dir=out, force=True)
    assert list(elsewhere.iterdir()) == []


def test_render_failure_leaves_nothing_half_written(tmp_path: Path) -> None:
    """A template that breaks midway (after some files are written) leaves no output at all."""
    broken = tmp_path / "broken"
    shutil.copytree(TEMPLATE_DIR, broken)
    (broken / "{{cookiecutter.project_slug}}" / "zz_last.txt").write_text("{{ unclosed ")
    out = tmp_path / "out"
    with pytest.raises(TemplateError, match="failed to render"):
        scaffold.create_project(str(broken), output_dir=out)
    assert list(out.iterdir()) == []


# -- CLI -----------------------------------------------------------------------------------


def test_cli_new_creates_the_project_and_prints_next_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``agent-kit new NAME --no-input -x k=v`` renders the project and prints the next steps."""
    code = main(["new", "Order Bot", "--no-input", "-o", str(tmp_path), "-x", "tool_name=lookup"])
    out = capsys.readouterr().out
    assert code == 0
    assert 'TOOL = "lookup"' in (tmp_path / "order_bot" / "policies.py").read_text()
    assert "Next steps:" in out
    assert "pytest" in out
    assert "agent-kit run agent.py --dataset data/train.jsonl" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-x", "runtime_name=order-bot"], "runtime_name 'order-bot'"),
        (["-x", "project_slug=order bot"], "project_slug 'order bot'"),
        (["-x", "nonsense"], "expected key=value"),
        (["--template", "missing"], "unknown template 'missing'"),
    ],
)
def test_cli_new_bad_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """Bad variables or template names print ``error: ...`` and exit 2, writing nothing."""
    code = main(["new", "Order Bot", "--no-input", "-o", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert "error:" in err
    assert message in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["/proc", "/proc/self"])
def test_cli_new_into_an_unwritable_directory_exits_2_with_a_message(
    where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``new -o`` onto a directory nobody may create files in (/proc, even as root) prints one
    ``error:`` line naming the directory and exits 2, with no traceback."""
    code = main(["new", "Order Bot", "--no-input", "-o", where])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: cannot write")
    assert "Traceback" not in err
    assert not Path(where, "order_bot").exists()


def test_cli_new_into_a_read_only_directory_exits_2_with_a_message(tmp_path: Path) -> None:
    """``new -o`` onto a read-only directory (file permissions binding, as root too) prints
    one ``error:`` line naming the directory, exits 2 and writes nothing."""
    from fakes.permissions import run_unprivileged

    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        done = run_unprivileged(["new", "Order Bot", "--no-input", "-o", str(read_only)])
    finally:
        read_only.chmod(0o755)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: cannot write into {read_only}")
    assert "Traceback" not in done.stderr
    assert list(read_only.iterdir()) == []


def test_cli_new_refuses_an_existing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second ``agent-kit new`` of the same name exits 2; with --force it succeeds."""
    assert main(["new", "Order Bot", "--no-input", "-o", str(tmp_path)]) == 0
    assert main(["new", "Order Bot", "--no-input", "-o", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["new", "Order Bot", "--no-input", "-o", str(tmp_path), "--force"]) == 0


def test_cli_templates_lists_the_agent_template(capsys: pytest.CaptureFixture[str]) -> None:
    """``agent-kit templates`` lists each template; ``--json`` adds description and variables."""
    assert main(["templates"]) == 0
    assert "agent" in capsys.readouterr().out
    assert main(["templates", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    agent_row = next(r for r in rows if r["name"] == "agent")
    assert agent_row["description"]
    assert "project_name" in agent_row["variables"]


# -- user values are data, never template source -------------------------------------------

# Each payload, if Jinja evaluated it, would create the directory ``pwned`` in the working
# directory (the tests run in tmp_path), so its absence proves the value was never evaluated.
PAYLOADS = [
    pytest.param("{{ cycler.__init__.__globals__.os.mkdir('pwned') }}", id="cycler-globals"),
    pytest.param("{% set os = lipsum.__globals__.os %}{{ os.mkdir('pwned') }}", id="lipsum-set"),
]
AGENT_VARIABLES = scaffold.find_template("agent").variables()
FREE_TEXT = "agent_description"  # the one variable whose rule lets a payload through as text
BRACES = "Counts {{ 7 * 7 }}, {% if x %}tags{% endif %}, {# notes #} and {%raw%} literally"


def payload_problem(where: str, payload: str) -> str:
    """The problem line the agent template's validation reports for ``payload`` set at
    ``where`` (the name argument or a variable), quoting the value exactly as typed."""
    if where in ("name", "project_name"):  # the derived slug is the first problem reported
        slug = payload.lower().strip().replace(" ", "_").replace("-", "_")
        return f"  - project_slug {slug!r} is not valid"
    return f"  - {where} {payload!r} "


def assert_literal_in_project(project: Path, text: str) -> None:
    """``text`` appears verbatim in every rendered file that carries the description."""
    for name in ("README.md", "agent.py", "pyproject.toml"):
        assert text in (project / name).read_text(encoding="utf-8"), name


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("where", ["name", *AGENT_VARIABLES])
def test_cli_new_never_evaluates_a_template_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, payload: str
) -> None:
    """A Jinja payload typed as the name or any ``-x`` value is never run: it is refused with exit
    2 and an ``error:`` message quoting it literally, or (free text) rendered literally."""
    monkeypatch.chdir(tmp_path)
    args = [payload] if where == "name" else ["Safe Bot", "-x", f"{where}={payload}"]
    result = CliRunner().invoke(app, ["new", *args, "--no-input", "-o", "out"])
    assert not (tmp_path / "pwned").exists()
    if where == FREE_TEXT:
        assert result.exit_code == 0, result.output
        assert_literal_in_project(tmp_path / "out" / "safe_bot", payload)
        return
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: invalid template variables:\n")
    assert result.stderr.splitlines()[1].startswith(payload_problem(where, payload))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("where", ["name", *AGENT_VARIABLES])
def test_create_project_never_evaluates_a_template_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, payload: str
) -> None:
    """``create_project`` takes a payload as the name or any variable literally: it raises
    TemplateError quoting it, or (free text) writes it verbatim, and never evaluates it."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    if where == "name":
        kwargs: dict[str, object] = {"project_name": payload}
    else:
        kwargs = {"project_name": "Safe Bot", "extra_context": {where: payload}}
    if where == FREE_TEXT:
        project = scaffold.create_project(output_dir=out, **kwargs)  # type: ignore[arg-type]
        assert project.context[FREE_TEXT] == payload
        assert_literal_in_project(project.path, payload)
    else:
        with pytest.raises(TemplateError) as caught:
            scaffold.create_project(output_dir=out, **kwargs)  # type: ignore[arg-type]
        assert caught.value.message.splitlines()[0] == "invalid template variables:"
        assert caught.value.message.splitlines()[1].startswith(payload_problem(where, payload))
        assert list(out.iterdir()) == []
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_derived_defaults_see_a_payload_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: str
) -> None:
    """A payload name flows into the derived slug and runtime name as plain text, unevaluated."""
    monkeypatch.chdir(tmp_path)
    context = scaffold.resolve_context(scaffold.find_template("agent"), {"project_name": payload})
    slug = payload.lower().strip().replace(" ", "_").replace("-", "_")
    assert context["project_name"] == payload
    assert context["project_slug"] == context["runtime_name"] == slug
    assert not (tmp_path / "pwned").exists()


def test_braces_in_free_text_come_out_literally(tmp_path: Path) -> None:
    """Braces, tags and comments in the name and description reach the files character for
    character, through the CLI and through ``create_project``."""
    extra = ["-x", "project_slug=brace_bot", "-x", f"agent_description={BRACES}"]
    args = ["new", "{{ 7*7 }} Bot", "--no-input", "-o", str(tmp_path / "cli"), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    project = scaffold.create_project(
        project_name="{{ 7*7 }} Bot",
        output_dir=tmp_path / "api",
        extra_context={"project_slug": "brace_bot", "agent_description": BRACES},
    )
    assert tree(tmp_path / "cli" / "brace_bot") == tree(project.path)
    assert_literal_in_project(project.path, BRACES)
    readme = (project.path / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# {{ 7*7 }} Bot\n")
    assert '"""{{ 7*7 }} Bot: Counts {{ 7 * 7 }}' in (project.path / "agent.py").read_text()


def test_choice_yes_no_and_dict_variables_take_only_their_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a template with choice, yes/no and dict variables, ``-x`` selects only an offered
    option, and a payload there is refused, never evaluated."""
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "tpl"
    template.mkdir()
    manifest = {"name": "x", "flavour": ["plain", "spicy"], "fancy": False, "meta": {"a": "b"}}
    (template / "cookiecutter.json").write_text(json.dumps(manifest))
    info = scaffold.find_template(str(template))
    payload = "{{ cycler.__init__.__globals__.os.mkdir('pwned') }}"
    assert scaffold.resolve_context(info, {"flavour": "spicy", "fancy": "yes"}) == {
        "name": "x",
        "flavour": "spicy",
        "fancy": True,
        "meta": {"a": "b"},
    }
    for key, message in [
        ("flavour", "but the choices are"),
        ("fancy", "could not be converted to a boolean"),
        ("meta", "meta is a dictionary variable of template 'tpl'; -x cannot set it"),
    ]:
        with pytest.raises(TemplateError, match=re.escape(message)):
            scaffold.resolve_context(info, {key: payload})
    assert not (tmp_path / "pwned").exists()


# -- acceptance: the generated project in a fresh virtual environment ----------------------


def _run(args: list[str], *, cwd: Path | None = None, timeout: float = 300) -> str:
    """Run a command with a clean environment; fail the test with its output if it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COOKIECUTTER"))}
    env.pop("VIRTUAL_ENV", None)
    env["UV_PYTHON_DOWNLOADS"] = "never"
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


@pytest.mark.e2e
def test_generated_project_passes_its_tests_in_a_fresh_venv(tmp_path: Path) -> None:
    """Rendered with defaults and installed into a fresh venv, the project's tests pass and
    ``agent-kit run agent.py --dataset data/train.jsonl`` completes with every rollout rewarded.

    Trade-off, chosen to stay fast and offline-safe: the fresh venv (``uv venv``, no system
    site-packages) gets agent_kit *from the working tree* and the generated project installed
    for real (``uv pip install --no-deps -e``: real builds of both pyproject files, real console
    scripts, real entry points), while the third-party dependencies (strands, boto3, …) come
    from this test run's venv through a ``.pth`` line instead of being downloaded again. What
    this does not check is dependency resolution of agent_kit's own pins. The build backend
    (hatchling) comes from uv's cache, or PyPI on a cold cache.

    Needs the whole runtime and tooling (``RolloutApp`` exported by agent_kit, the emulator,
    the driver behind ``agent-kit run`` and ``agent_kit.testing.run_episode``).
    """
    project = scaffold.create_project(output_dir=tmp_path / "projects")
    uv = shutil.which("uv", path=str(VENV_BIN)) or shutil.which("uv")
    assert uv, "uv is a dev dependency of agent_kit"
    venv = tmp_path / "fresh"
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)])
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    ours = subprocess.run(  # this venv's site-packages, for the third-party dependencies
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib.strip()) / "_agent_kit_test_deps.pth").write_text(ours + "\n")
    _run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(python),
            "--no-deps",
            "-e",
            str(REPO),
            "-e",
            str(project.path),
        ],
    )
    where = _run(
        [
            str(python),
            "-c",
            "import agent_kit, importlib.metadata as m; print(agent_kit.__file__); "
            "print(m.version('my_agent'))",
        ],
        cwd=tmp_path,
    ).split()
    assert where == [str(REPO / "agent_kit" / "__init__.py"), "0.1.0"]

    report = _run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project.path,
    )
    tail = report.strip().splitlines()[-1]
    assert " passed" in tail
    assert "warning" not in tail, tail
    assert not any(word in tail for word in ("failed", "error", "skipped")), report

    stdout = _run(
        [
            str(venv / "bin" / "agent-kit"),
            "run",
            "agent.py",
            "--dataset",
            "data/train.jsonl",
            "--group-size",
            "2",
            "--out",
            str(tmp_path / "runs"),
            "--json",
        ],
        cwd=project.path,
    )
    summary = json.loads(stdout.strip().splitlines()[-1])
    rows = len((project.path / "data" / "train.jsonl").read_text().splitlines())
    assert summary["counts"]["rewarded"] == rows * 2
    assert summary["counts"]["lost"] == 0
    assert summary["metrics"]["rollout/reward/mean"] is not None


@pytest.mark.e2e
def test_doctor_reward_checks_the_generated_projects_ordering(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A generated project declares REWARD_ORDERINGS: a real run of it (agent subprocess,
    emulator, its scripted policy with sampling noise), then ``doctor reward --entrypoint``
    re-scores it and finds the ordering holding on every pair, with no error finding."""
    project = scaffold.create_project(output_dir=tmp_path).path
    out = tmp_path / "runs"
    args = ["run", str(project / "agent.py"), "--dataset", str(project / "data" / "train.jsonl")]
    args += ["--policy", f"scripted:{project / 'policies.py'}:random_guess", "--group-size", "4"]
    args += ["--temperature", "0.8", "--out", str(out), "--name", "tpl", "--json"]
    assert main(args) == 0
    capsys.readouterr()
    run_dir = out / "tpl"
    code = main(["doctor", "reward", str(run_dir), "--entrypoint", str(project / "agent.py")])
    report = capsys.readouterr().out
    assert main(["doctor", "reward", str(run_dir), "--json"]) == code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["error"] == 0
    (ordering,) = [f for f in data["findings"] if f["check"] == "ordering"]
    assert "'solved fast > solved slow > unsolved' holds on all" in ordering["title"]
    assert "solved fast > solved slow > unsolved" in report

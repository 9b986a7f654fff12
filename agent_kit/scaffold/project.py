"""Project scaffolding: find cookiecutter templates, validate their variables, render projects.

Templates are plain cookiecutter templates (``cookiecutter.json`` + ``{{cookiecutter.*}}/``), so
``cookiecutter templates/agent`` works without agent_kit. This module adds what ``agent-kit new``
promises on top of cookiecutter's Python API:

- template discovery: the templates shipped in the wheel (``agent_kit/_templates``) or, in a
  source checkout, the repository's ``templates/`` directory; any directory holding a
  ``cookiecutter.json`` can be named by path too;
- up-front validation with the template's own rules: the ``validate(context) -> list[str]``
  function of its ``hooks/pre_gen_project.py`` (the same function the hook runs under plain
  cookiecutter), plus unknown ``-x`` keys and an existing target directory;
- all-or-nothing output: the project is rendered into a staging directory beside the target and
  moved into place only when rendering (hooks included) succeeded, so a failure leaves nothing
  half-written;
- user values are data, never template source (see below).

Values a user types (the project name, ``-x key=value``, answers at the prompts) reach the
project as literal text and are never evaluated. Cookiecutter itself renders every variable's
value with Jinja (so ``{{ ... }}`` in a value would run, with the full power of Jinja's globals),
and ``cookiecutter()`` renders the resolved values a second time before writing files. Two
structural rules close that, with no list of forbidden substrings:

- at the boundary, each typed value replaces the template's default as a Jinja *string literal*
  whose every character is written as a ``\\U........`` escape (:func:`_literal_source`):
  Jinja's lexer sees only one quoted string of hex escapes and renders exactly the typed text,
  whatever it contains. Derived defaults (``project_slug`` from ``project_name``) still come
  from cookiecutter's own ``prompt_for_config``, so they render exactly as under plain
  cookiecutter, and they see the typed value only as a string object, never as source.
  Choice and yes/no variables accept only the template's own options; a dict variable cannot
  be set with ``-x``;
- files are rendered with ``cookiecutter.generate.generate_files`` from the resolved values,
  the same values :func:`validate_context` checked, so no value goes through Jinja a second
  time; file contents and the pre-generation hook receive the values only as data.

A sandboxed Jinja environment was not chosen: it would still *evaluate* a typed value
(``{{ 7 * 7 }}`` becoming ``49``), and it is not needed for the template's own text, which is
trusted as much as the Python hooks the template ships. (A ``hooks/pre_prompt`` script is not
run: values are resolved from the template's ``cookiecutter.json`` as it is.)

Every refusal is a :class:`~agent_kit.errors.TemplateError` with a readable message.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_kit.errors import TemplateError

__all__ = [
    "DEFAULT_TEMPLATE",
    "NewProject",
    "TemplateInfo",
    "create_project",
    "find_template",
    "list_templates",
    "resolve_context",
    "template_roots",
    "validate_context",
]

DEFAULT_TEMPLATE = "agent"
"""The template ``agent-kit new`` uses unless told otherwise."""

_MANIFEST = "cookiecutter.json"
#: A template's ``cookiecutter.json`` key naming the project folder that receives agent_kit's
#: runtime half as a wheel (``_agent_kit_version`` is then set to the running version).
_RUNTIME_WHEEL_KEY = "_runtime_wheel_dir"
_VALIDATOR_HOOK = Path("hooks") / "pre_gen_project.py"

Validator = Callable[[Mapping[str, object]], list[str]]


@dataclass(frozen=True)
class TemplateInfo:
    """One cookiecutter template: its name, directory and one-line description."""

    name: str
    path: Path
    description: str

    def manifest(self) -> dict[str, Any]:
        """The parsed ``cookiecutter.json`` (raw defaults, unrendered)."""
        return _read_manifest(self.path)

    def variables(self) -> list[str]:
        """The variables a user may set (``-x key=value``), in prompt order."""
        return [key for key in self.manifest() if not key.startswith("_")]


@dataclass(frozen=True)
class NewProject:
    """A rendered project: where it is, the variables it was rendered with, what to do next."""

    path: Path
    context: dict[str, Any]
    template: TemplateInfo
    next_steps: list[str] = field(default_factory=list)


def template_roots() -> list[Path]:
    """Directories searched for named templates, most specific first (existing ones only).

    ``agent_kit/_templates`` is where the wheel carries the repository's ``templates/``; in an
    editable or source install, that directory is ``templates/`` beside the package.
    """
    package_dir = Path(__file__).resolve().parents[1]
    candidates = [package_dir / "_templates", package_dir.parent / "templates"]
    return [path for path in candidates if path.is_dir()]


def list_templates() -> list[TemplateInfo]:
    """All named templates (first root wins on a name clash), sorted by name."""
    found: dict[str, TemplateInfo] = {}
    for root in template_roots():
        for child in sorted(root.iterdir()):
            if child.name not in found and (child / _MANIFEST).is_file():
                found[child.name] = _info(child.name, child)
    return [found[name] for name in sorted(found)]


def find_template(name_or_path: str | os.PathLike[str]) -> TemplateInfo:
    """Resolve a template by name (see :func:`list_templates`) or by a directory path."""
    text = os.fspath(name_or_path)
    for info in list_templates():
        if info.name == text:
            return info
    path = Path(text).expanduser()
    if (path / _MANIFEST).is_file():
        return _info(path.resolve().name, path.resolve())
    names = ", ".join(t.name for t in list_templates()) or "none found"
    raise TemplateError(
        f"unknown template {text!r}: not a template name (available: {names}) "
        f"and not a directory containing {_MANIFEST}"
    )


def resolve_context(
    template: TemplateInfo,
    extra_context: Mapping[str, object] | None = None,
    *,
    no_input: bool = True,
) -> dict[str, Any]:
    """The template's variables after overrides, derived defaults and (optionally) prompts.

    Uses cookiecutter's own machinery (``generate_context`` + ``prompt_for_config``), so derived
    values such as ``project_slug`` come out exactly as plain cookiecutter renders them. Every
    override is taken literally: it is never rendered as a Jinja template (see the module
    docstring). The user's cookiecutter config file is ignored, so a project renders the same on
    every machine. Raises :class:`TemplateError` for an unknown variable name, a value a choice,
    yes/no or dict variable cannot take, or a template that fails to render.
    """
    answers = _resolve_answers(template, extra_context, no_input=no_input)
    return {key: value for key, value in answers.items() if not key.startswith("_")}


def validate_context(template: TemplateInfo, context: Mapping[str, object]) -> None:
    """Apply the template's own validation rules; raise one TemplateError listing every problem.

    The rules are the ``validate`` function of the template's ``hooks/pre_gen_project.py``; a
    template without one accepts any values.
    """
    validator = _load_validator(template)
    if validator is None:
        return
    problems = validator(context)
    if problems:
        raise TemplateError(
            "invalid template variables:\n" + "\n".join(f"  - {p}" for p in problems)
        )


def create_project(
    template: str | os.PathLike[str] | TemplateInfo = DEFAULT_TEMPLATE,
    *,
    project_name: str | None = None,
    output_dir: str | os.PathLike[str] = ".",
    extra_context: Mapping[str, object] | None = None,
    no_input: bool = True,
    force: bool = False,
) -> NewProject:
    """Render ``template`` into ``output_dir/<project_slug>``, all or nothing.

    Guarantees: the variables pass the template's validation before anything is written; an
    existing target directory is refused unless ``force`` (then template files overwrite and
    other files stay, as cookiecutter's ``overwrite_if_exists`` does, except that a symlink
    where the template writes is refused, never written through; a target that is itself a
    symlink is always refused); rendering and hooks run
    in a staging directory, so a failure there leaves the target exactly as it was and removes
    the staging files (only an OS error while copying over an existing target with ``force``
    can leave it partly updated).
    """
    info = template if isinstance(template, TemplateInfo) else find_template(template)
    overrides: dict[str, object] = dict(extra_context or {})
    if project_name is not None:
        overrides.setdefault("project_name", project_name)
    answers = _resolve_answers(info, overrides, no_input=no_input)
    context = {key: value for key, value in answers.items() if not key.startswith("_")}
    validate_context(info, context)
    wheel_dir = answers.get(_RUNTIME_WHEEL_KEY)
    if wheel_dir is not None:
        from agent_kit import __version__

        answers["_agent_kit_version"] = __version__

    slug = str(context.get("project_slug") or "")
    if not slug or Path(slug).name != slug or slug in {".", ".."}:
        raise TemplateError(f"project_slug {slug!r} cannot name a directory")
    out = Path(output_dir).expanduser().resolve()
    target = out / slug
    if target.is_symlink():
        raise TemplateError(
            f"{target} is a symlink; agent-kit new writes only into a real directory "
            "(remove the link or choose another output directory)"
        )
    if target.exists() and not target.is_dir():
        raise TemplateError(f"{target} exists and is not a directory")
    if target.exists() and not force:
        raise TemplateError(
            f"{target} already exists; choose another name or output directory, "
            "or pass --force to render over it"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TemplateError(f"cannot create output directory {out}: {exc}") from None
    _render_staged(info, answers, out, target, wheel_dir=str(wheel_dir) if wheel_dir else None)
    return NewProject(
        path=target, context=context, template=info, next_steps=_next_steps(info, context, target)
    )


# -- internals -------------------------------------------------------------------------------


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads((path / _MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TemplateError(f"cannot read {path / _MANIFEST}: {exc}") from None
    if not isinstance(data, dict):
        raise TemplateError(f"{path / _MANIFEST} must hold a JSON object")
    return data


def _info(name: str, path: Path) -> TemplateInfo:
    manifest = _read_manifest(path)
    description = manifest.get("_description")
    return TemplateInfo(
        name=name, path=path, description=description if isinstance(description, str) else ""
    )


def _load_validator(template: TemplateInfo) -> Validator | None:
    hook = template.path / _VALIDATOR_HOOK
    if not hook.is_file():
        return None
    try:
        # run_path executes the hook's module body without its __main__ block and writes no
        # bytecode into the template directory (which may be read-only inside a wheel).
        namespace = runpy.run_path(str(hook), run_name="agent_kit_template_hook")
    except Exception as exc:  # noqa: BLE001 - any failure of user template code is reported
        raise TemplateError(f"cannot load {hook}: {type(exc).__name__}: {exc}") from None
    validator = namespace.get("validate")
    if not callable(validator):
        return None
    return validator  # type: ignore[no-any-return]


def _resolve_answers(
    template: TemplateInfo, extra_context: Mapping[str, object] | None, *, no_input: bool
) -> dict[str, Any]:
    """Every variable of ``template`` (private ones included), overrides taken literally."""
    from cookiecutter.exceptions import CookiecutterException
    from cookiecutter.generate import apply_overwrites_to_context, generate_context
    from cookiecutter.prompt import prompt_for_config
    from cookiecutter.utils import create_env_with_context
    from jinja2 import TemplateError as JinjaTemplateError

    overrides = {key: str(value) for key, value in (extra_context or {}).items()}
    known = template.variables()
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise TemplateError(
            f"unknown template variable(s) {', '.join(unknown)} for template {template.name!r}; "
            f"known: {', '.join(known)}"
        )
    try:
        context = generate_context(context_file=str(template.path / _MANIFEST))
        raw = context["cookiecutter"]
        env = create_env_with_context(context)
        options: dict[str, str] = {}
        for key, value in overrides.items():
            if isinstance(raw[key], dict):
                raise TemplateError(
                    f"{key} is a dictionary variable of template {template.name!r}; "
                    "-x cannot set it"
                )
            if isinstance(raw[key], (list, bool)):
                options[key] = value  # must be one of the template's own options
            else:
                raw[key] = _literal_source(env, value)
        try:
            apply_overwrites_to_context(raw, options)
        except ValueError as exc:
            raise TemplateError(f"template {template.name!r}: {exc}") from None
        answers: dict[str, Any] = dict(prompt_for_config(context, no_input))
    except (CookiecutterException, JinjaTemplateError) as exc:
        raise TemplateError(
            f"template {template.name!r} could not render its variables: {exc}"
        ) from None
    return answers


def _literal_source(env: Any, value: str) -> str:
    """Jinja source that renders to exactly ``value``: a string literal of ``\\U`` escapes.

    Jinja decodes a string literal's escapes with Python's ``unicode-escape`` codec, so each
    character written as ``\\U`` + eight hex digits comes back unchanged, and nothing of
    ``value`` reaches the lexer as syntax (delimiters, quotes, newlines, line statements).
    """
    escaped = "".join(f"\\U{ord(char):08x}" for char in value)
    return f"{env.variable_start_string} '{escaped}' {env.variable_end_string}"


def _render_staged(
    info: TemplateInfo,
    answers: Mapping[str, Any],
    out: Path,
    target: Path,
    *,
    wheel_dir: str | None = None,
) -> None:
    from cookiecutter.exceptions import CookiecutterException, FailedHookException
    from cookiecutter.generate import generate_files
    from jinja2 import TemplateError as JinjaTemplateError

    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.agent-kit-new-", dir=out))
    except OSError as exc:
        raise TemplateError(f"cannot write into {out}: {exc.strerror or exc}") from None
    # The context cookiecutter() hands to generate_files, built from the validated values (no
    # user config, no replay file, and ``_cookiecutter`` holds the resolved values rather than
    # the template's raw ones); generate_files renders file names, contents and hooks with them
    # as data and never renders a value itself again.
    context = {
        "cookiecutter": {
            **answers,
            "_template": str(info.path),
            "_output_dir": str(staging),
            "_repo_dir": str(info.path),
            "_checkout": None,
        },
        "_cookiecutter": {key: v for key, v in answers.items() if not key.startswith("_")},
    }
    try:
        try:
            rendered = Path(
                generate_files(repo_dir=str(info.path), context=context, output_dir=str(staging))
            )
        except FailedHookException as exc:
            raise TemplateError(
                f"template {info.name!r} refused the variables ({exc}); see the hook's "
                "messages above"
            ) from None
        except (CookiecutterException, JinjaTemplateError) as exc:
            raise TemplateError(f"template {info.name!r} failed to render: {exc}") from None
        if rendered.resolve() != (staging / target.name).resolve():
            raise TemplateError(
                f"template {info.name!r} rendered {rendered.name!r}, expected {target.name!r}"
            )
        if wheel_dir is not None:
            _write_runtime_wheel(info, rendered, wheel_dir)
        if target.exists():
            _copy_over(rendered, target)
        else:
            os.replace(rendered, target)
    except OSError as exc:
        raise TemplateError(f"cannot write {target}: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _copy_over(rendered: Path, target: Path) -> None:
    """Copy the rendered tree over an existing ``target`` (``--force``) without ever writing
    through a symlink: a path the template writes that is a symlink in ``target`` (a file or
    a folder on the way) is refused up front, naming every one, and each file is written to a
    temporary name and renamed over its place, so a link made meanwhile is replaced, never
    followed. Files the template does not write (a ``.venv`` full of links) are not looked at.
    """
    written = sorted(path.relative_to(rendered) for path in rendered.rglob("*"))
    links = [target / rel for rel in written if (target / rel).is_symlink()]
    if links:
        shown = ", ".join(f"{link} -> {os.readlink(link)}" for link in links)
        raise TemplateError(
            f"--force will not write through symlinks in {target}: {shown}; remove them "
            "or render into another directory"
        )
    for rel in written:
        source, dest = rendered / rel, target / rel
        if source.is_dir():
            dest.mkdir(exist_ok=True)
            continue
        partial = dest.with_name(f".{dest.name}.agent-kit-new")
        shutil.copy2(source, partial)
        os.replace(partial, dest)


def _write_runtime_wheel(info: TemplateInfo, rendered: Path, wheel_dir: str) -> None:
    """Write agent_kit's runtime half as a wheel into ``rendered/wheel_dir`` (the template
    asks for it with ``_runtime_wheel_dir``): the AgentCore CLI's packaging installs it from
    there, since agent_kit is not on PyPI."""
    from agent_kit.deploy.agentcore_cli import build_runtime_wheel
    from agent_kit.errors import AgentKitError

    dest = (rendered / wheel_dir).resolve()
    if not dest.is_relative_to(rendered.resolve()):
        raise TemplateError(f"template {info.name!r}: {_RUNTIME_WHEEL_KEY} leaves the project")
    try:
        build_runtime_wheel(dest)
    except AgentKitError as exc:
        raise TemplateError(f"cannot write agent_kit's runtime wheel: {exc}") from None


def _next_steps(info: TemplateInfo, context: Mapping[str, Any], target: Path) -> list[str]:
    try:
        shown = os.path.relpath(target)
    except ValueError:  # another drive on Windows
        shown = str(target)
    if shown.startswith(os.pardir):
        shown = str(target)
    values = {**{k: str(v) for k, v in context.items()}, "project_dir": shown}
    raw = info.manifest().get("_next_steps")
    if not isinstance(raw, list):
        return [f"cd {shown}"]
    steps = []
    for item in raw:
        try:
            steps.append(str(item).format(**values))
        except (KeyError, IndexError, ValueError):
            steps.append(str(item))
    return steps

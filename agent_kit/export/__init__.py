"""Export a local run where the real job's results go: MLflow (and any OTLP collector).

:func:`agent_kit.export.mlflow.export_run` is the entry point; :mod:`~agent_kit.export.spans`
builds the per-rollout span trees, :mod:`~agent_kit.export.steps` the per-step metrics and
:mod:`~agent_kit.export.otlp` sends the spans over OTLP/HTTP. MLflow and OpenTelemetry are
imported only when an export runs (the ``mlflow`` extra).
"""

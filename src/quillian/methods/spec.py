"""How a method is declared: one :class:`MethodSpec` per method, in its package.

The spec says what the method needs (a retriever and which kind by default, a knowledge
graph, a KG-embedding model, a schema, extra index stages) and what options it takes
(its configuration dataclass). The engine, the CLI, the server and the benchmarks read
only the specs, through :mod:`quillian.methods.table`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from quillian.components.concurrency import Offload
from quillian.components.kg.base import ExternalGraph
from quillian.components.llm.tasks import TaskRunner
from quillian.components.retrieval.base import Retriever
from quillian.config import OptionSpec, build_config, config_options
from quillian.errors import ConfigError
from quillian.index.stages import BuildStage
from quillian.methods.base import PipelineBase

__all__ = ["ConfigurableStage", "MethodSpec"]


@runtime_checkable
class ConfigurableStage(Protocol):
    """A method's build stage that reads the build's options (recorded in the index's
    manifest, so a rebuild after a deletion uses the same ones) and, where it asks a
    model, the build's task runner (None on a rebuild with no model)."""

    name: str

    def configured(self, options: Mapping[str, Any], runner: TaskRunner | None) -> BuildStage:
        """The stage to run for this build."""
        ...


@dataclass(frozen=True)
class MethodSpec:
    """A question-answering method: its name, class, needs and options."""

    name: str
    cls: type[PipelineBase]
    summary: str
    """One line for help texts and method lists."""
    retriever: str | None = None
    """The retriever kind used unless the caller picks another; None: no retrieval."""
    needs_graph: bool = False
    """Reads a knowledge graph (``--kg``) besides the corpus."""
    needs_kge: bool = False
    """Reads a trained KG-embedding model."""
    needs_schema: bool = False
    """Reads a typed schema."""
    aliases: tuple[str, ...] = ()
    index_stages: tuple[BuildStage, ...] = ()
    """Build stages this method adds after the default ones."""

    @property
    def config(self) -> type | None:
        """The method's frozen configuration dataclass (its options), if any."""
        return self.cls.config_class

    @property
    def options(self) -> tuple[OptionSpec, ...]:
        return config_options(self.config)

    def reads_index(self, retriever: str | None = None) -> bool:
        """Whether answering (with ``retriever`` in place of the default, if given)
        reads the index."""
        return (
            retriever is not None
            or self.retriever is not None
            or self.needs_graph
            or self.needs_kge
        )

    def build(
        self,
        runner: TaskRunner,
        retriever: Retriever | None,
        *,
        graph: ExternalGraph | None = None,
        options: dict[str, Any] | None = None,
        offload: Offload | None = None,
        knowledge: Any = None,
        knowledge_models: Callable[[str], Awaitable[TaskRunner]] | None = None,
    ) -> PipelineBase:
        """The method's pipeline, with its options checked against its configuration.

        ``knowledge`` is what a KG-embedding method reads (a graph with its trained
        model); ``knowledge_models`` opens a task runner on another LLM spec (the models
        that write Know3-RAG's references)."""
        config = build_config(f"method {self.name!r}", self.config, options or {})
        if self.needs_kge:
            if knowledge is None:
                raise ConfigError(f"method {self.name!r} needs a trained KG-embedding model")
            kge_cls: Any = self.cls  # its constructor takes the knowledge and models
            built: PipelineBase = kge_cls(
                runner,
                retriever,
                knowledge,
                config,
                offload=offload,
                knowledge_models=knowledge_models,
            )
            return built
        if not self.needs_graph:
            return self.cls(runner, retriever, config, offload=offload)
        if graph is None:
            raise ConfigError(f"method {self.name!r} needs a knowledge graph (--kg)")
        kg_cls: Any = self.cls  # a KGModules pipeline: its constructor takes the graph
        pipeline: PipelineBase = kg_cls(runner, retriever, graph, config, offload=offload)
        return pipeline

"""The toy source as the registry sees it: its settings section, its ``index`` option and its Dagster spec."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Self

from rag_pipeline.env_values import EnvValues
from rag_pipeline.sources.registry import IndexOption, InputCheck, Source, SourceSettings


class ToySettings(SourceSettings):
    """TOY_FOLDER / --toy-folder: the folder of JSON documents (unset: the source holds nothing)."""

    folder: Path | None = None

    @classmethod
    def from_env(cls, env: EnvValues) -> Self:
        return cls(folder=env.optional_path("TOY_FOLDER"))

    def inputs(self) -> tuple[InputCheck, ...]:
        return (InputCheck(self.folder, "toy folder", "--toy-folder", "TOY_FOLDER"),) if self.folder else ()


@dataclass(frozen=True)
class ToyIdentity:
    """Whose notes these are: the folder's name."""

    shelf_owner: str

    @property
    def key(self) -> str:
        return self.shelf_owner

    def describe(self) -> str:
        return f"toy notes of {self.shelf_owner}"


SOURCE = Source(
    name="toy",
    title="Toy notes",
    containers_label="shelves",
    settings=ToySettings,
    dagster_spec="rag_pipeline_tests.kit.toy_source.spec:toy_spec",
    index_options=(IndexOption("--toy-folder", "folder", "folder of JSON documents (TOY_FOLDER)", "path", True),),
    index_examples=("rag-pipeline index --toy-folder notes/",),
)

"""One live read of a run's containers, each over its days, shared by every API resource: one container's
refusal or faulty answers (a paging guard, a timeout) fail that container alone, and nothing of its partial read
is kept, so none of its partitions is recorded as synced and the next run reads them again."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rag_pipeline.sources.paging import GuardTripped
from rag_pipeline.sources.source_read import SourceRead


def read_containers(
    days_by_container: Mapping[str, Sequence[str]],
    read_days: Callable[[str, Sequence[str]], Any],
    refused: tuple[type[Exception], ...],
    counted: Sequence[str] = (),
    timeout: type[Exception] | None = None,
) -> tuple[SourceRead, dict[str, str], dict[str, int]]:
    """The documents of every container ``read_days`` could read, the guard tripped per failed container, and the
    sum of each ``counted`` attribute of the reads (``issues_fetched``…). ``refused``: the reader's access errors;
    ``timeout``: the one among them that counts as a tripped guard."""
    out = SourceRead()
    guards_tripped: dict[str, str] = {}
    totals = dict.fromkeys(counted, 0)
    for container, days in sorted(days_by_container.items()):
        try:
            read = read_days(container, days)
        except GuardTripped as exc:
            out.failed[container] = str(exc)
            guards_tripped[container] = exc.guard
            continue
        except refused as exc:
            out.failed[container] = str(exc)
            if timeout is not None and isinstance(exc, timeout):
                guards_tripped[container] = "timeout"
            continue
        out.documents.extend(read.documents)
        out.problems.extend(read.problems)
        out.partition_day.update(read.partition_day)
        for name in counted:
            totals[name] += getattr(read, name)
    return out, guards_tripped, totals

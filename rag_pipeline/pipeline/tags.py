"""The run tags the sync runs, the runners and the raw assets read and write."""

SOURCE_TAG = "rag/source"
API_CALLS_TAG = "rag/api_calls"
# Containers a run could not read, as JSON {container: first line of the error}: their watermark stays.
FAILED_CONTAINERS_TAG = "rag/failed_containers"
PLANNED_AT_TAG = "rag/planned_at"
# How many containers a sync run covers, and the requests it was estimated to make (the budget's ledger).
CONTAINER_COUNT_TAG = "rag/containers"
ESTIMATED_REQUESTS_TAG = "rag/estimated_requests"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

# Tags of the sync runs of earlier versions (one run per container, day x container partitions): still read,
# so the watermarks of a data folder indexed before weekly partitions carry over.
LEGACY_CONTAINER_TAG = "rag/container"
LEGACY_SYNCED_THROUGH_TAG = "rag/synced_through"
LEGACY_SYNC_FROM_TAG = "rag/sync_from"
SYNC_REASON_TAG = "rag/sync_reason"

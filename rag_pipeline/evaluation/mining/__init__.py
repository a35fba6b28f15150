"""Eval sets mined from a company's own workspace: relevance judgements its people already made (a link pasted
while asking, a Jira duplicate, a thread's question and its answers), turned into the project's eval-set format so
every index evaluates itself. Never imports dagster; the Dagster asset and ``rag-pipeline evaluate`` call
:func:`rag_pipeline.evaluation.mining.mine.mine_workspace`."""

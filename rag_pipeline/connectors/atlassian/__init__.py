"""What the Atlassian connectors (Jira and Confluence) share: the REST client builder, the live API settings, the
site identity of an offline dump, and the reader kernel (error wording, calls under a read budget, day windows in
the API user's time zone, container discovery, ACL group names).

It names no source: each connector passes its own words (product name, variables, flags), so neither connector
imports the other and this package stays importable by either alone.
"""

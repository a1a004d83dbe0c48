"""The gang domain: task groups, placeholders, application state; plain dicts in, decisions out."""

"""The supply chain of a published image: its signature, SBOM and provenance (pure formats in
``signing``, ``sbom``, ``provenance`` and ``cosign``), the registry's HTTP API (``registry``),
and the pull that checks them before it runs anything (``pull``)."""

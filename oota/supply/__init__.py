"""The supply chain of a published image: its signature, SBOM and provenance (pure formats in
``signing``, ``sbom``, ``provenance`` and ``cosign``) and the registry's HTTP API (``registry``).
What drives the Engine with them (attaching them after a push, the checks of a pull) lives in
:mod:`oota.execute`."""

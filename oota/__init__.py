"""oota: build, verify and report PyTorch + accelerator stacks in containers.

The pipeline, one module per stage: ``matrix`` (load matrix.yaml) -> ``plan`` (cells) ->
``render`` (Dockerfiles) -> ``build`` -> ``verify`` -> ``report``. ``engine`` is the only
module that talks to Docker.
"""

__version__ = "0.1.0"

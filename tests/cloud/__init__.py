"""Nova's in-process cloud with this driver, for the functional tests and
``lab/``: the cloud base class, the clique scheduling base, the stand-in
Fabric Manager and the corpus' domain XML."""

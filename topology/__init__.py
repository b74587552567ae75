"""Process topologies: meshes with named axes (abstract, or bound to MPI)."""

from .mesh import AbstractMesh, Mesh, MeshError, RankView

__all__ = ["AbstractMesh", "Mesh", "MeshError", "RankView"]

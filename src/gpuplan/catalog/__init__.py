"""Catalogs: bundled data files plus the user's own, validated at load, looked up by id or alias."""

from .accelerators import load_accelerators, read_accelerator_file
from .models import load_models, read_config_path, read_model_file, resolve_model
from .registry import Registry

__all__ = ["Registry", "load_accelerators", "read_accelerator_file", "load_models", "read_model_file",
           "read_config_path", "resolve_model"]

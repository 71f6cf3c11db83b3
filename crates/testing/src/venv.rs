//! Where the interop tests' Python virtualenv is, and which kazoo it must hold.

/// Environment variable naming the virtualenv that holds kazoo (defaults to [`DEFAULT_VENV`]).
pub const VENV_ENV: &str = "ZK_RECIPES_VENV";

/// Where `scripts/install-deps.sh` makes the virtualenv with kazoo 2.11 from PyPI.
pub const DEFAULT_VENV: &str = "/opt/zk-recipes-venv";

/// The kazoo version the interop tests are written against (its `lock.py` and `election.py`).
pub const KAZOO_VERSION: &str = "2.11";

//! # zk-recipes-model
//!
//! Models of zk-recipes' ownership protocols, checked exhaustively within stated bounds by
//! [stateright](https://docs.rs/stateright). Each model's client side calls the library's own
//! decision functions (`zk_recipes_lock_internals`'s drivers and acquire rule,
//! `zk_recipes_framework::decisions`), so a change to the library's decision changes what is
//! checked. Each model has known-bad variants, negative controls the checker must catch.
//!
//! See `docs/model.md` in the repository for what each model covers and leaves out.

pub mod barrier;
pub mod batch;
pub mod bounds;
pub mod check;
pub mod leadership;
pub mod lock;
pub mod queue;

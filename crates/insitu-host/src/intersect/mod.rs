//! The Smart SSD list intersection (DaMoN '16). For now: the analytical cost model (§4) that predicts host
//! and device time and energy, stage by stage, and chooses a placement. Lists on devices, sessions and the
//! operator come next (issue 5).

pub mod model;

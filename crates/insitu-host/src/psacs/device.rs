//! PSACS's device placement: `psacs-shuffle` on every device at once.

use insitu_device::protocol::{PsacsShuffle, ShuffleArgs};

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::psacs::job::ShuffleJob;

/// Runs the shuffle in every device; returns (bytes stored, bytes before compression).
pub(crate) fn shuffle_on_devices(array: &Array, job: &ShuffleJob<'_>) -> Result<(u64, u64)> {
    let ShuffleJob { table, out, devices, info, rf, fields, float_fields, opts, out_kind } = *job;
    array.progress().stage("shuffle", Some(devices.len() as u64), "devices");
    let mut running = Vec::new();
    for (i, dev) in devices.iter().enumerate() {
        let args = ShuffleArgs {
            part: info.parts[i].table_part(table),
            row_format: rf.clone(),
            key_fields: fields.iter().map(|f| *f as u32).collect(),
            partitions: opts.partitions,
            hash: opts.hash,
            layout: opts.layout,
            out: out.into(),
            memory_budget: opts.memory_budget,
            codec: opts.codec,
            attrs: crate::catalog::part_attrs(out_kind, i, devices, array.catalog().generation),
            float_fields: float_fields.iter().map(|f| *f as u32).collect(),
        };
        running.push(array.device(*dev)?.start::<PsacsShuffle>(args).map_err(HostError::device(*dev))?);
    }
    let outputs = array.wait_all(running)?;
    Ok(outputs.iter().fold((0, 0), |(s, r), o| (s + o.stored_bytes, r + o.raw_bytes)))
}

//! `device.json`: what a device directory is (its id in the array and its hardware profile), so that the
//! directory alone is enough to serve the device, in this process or another.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{DeviceError, Result};
use crate::profile::Profile;

const FILE: &str = "device.json";
const FORMAT: u32 = 1;
/// The line before the JSON, with its checksum: one flipped digit of the profile (a card count) would
/// otherwise open the device's flash on other figures, and a cleaning then erase live pages.
const HEADER: &str = "insitu device.json crc32=";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DeviceConfig {
    pub format: u32,
    pub id: u32,
    pub profile: Profile,
}

impl DeviceConfig {
    pub(crate) fn new(id: u32, profile: Profile) -> DeviceConfig {
        DeviceConfig { format: FORMAT, id, profile }
    }

    pub(crate) fn save(&self, dir: &Path) -> Result<()> {
        let body = serde_json::to_vec_pretty(self).map_err(|e| DeviceError::Protocol(e.to_string()))?;
        insitu_flash::persist::write_atomic(
            &dir.join(FILE),
            &insitu_flash::persist::with_checksum(HEADER, &body),
        )?;
        Ok(())
    }

    pub(crate) fn load(dir: &Path) -> Result<DeviceConfig> {
        let path = dir.join(FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(DeviceError::NotADevice(dir.to_path_buf()))
            }
            Err(e) => return Err(DeviceError::io(&path, e)),
        };
        let corrupt = |detail: String| {
            DeviceError::Flash(insitu_flash::FlashError::Corrupt {
                what: "device configuration".into(),
                path: path.clone(),
                detail,
            })
        };
        let json = insitu_flash::persist::checked_body(HEADER, &bytes).map_err(corrupt)?;
        let c: DeviceConfig = serde_json::from_slice(json).map_err(|e| corrupt(e.to_string()))?;
        if c.format != FORMAT {
            return Err(DeviceError::Flash(insitu_flash::FlashError::Version {
                path,
                found: c.format,
                expected: FORMAT,
            }));
        }
        c.profile.validate()?;
        Ok(c)
    }
}

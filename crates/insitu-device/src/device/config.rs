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
/// Its second copy.
const SECOND: &str = "device.b.json";

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
        let bytes = insitu_flash::persist::with_checksum(HEADER, &body);
        insitu_flash::persist::write_atomic(&dir.join(FILE), &bytes)?;
        // The second copy, after the first: what a damaged or lost first copy is mended from at open.
        let _ = insitu_flash::persist::write_atomic(&dir.join(SECOND), &bytes);
        Ok(())
    }

    /// The device's configuration, from `device.json`, or from its second copy when the first is damaged
    /// or gone (the first is then written again from it, the damaged one kept as `device.json.damaged`).
    /// A second copy missing or out of step (a device made before there was one) is written again, and a
    /// configuration written without a checksum (by an older insitu) gets one.
    pub(crate) fn load(dir: &Path) -> Result<DeviceConfig> {
        let (first, second) = (dir.join(FILE), dir.join(SECOND));
        match read(dir, &first) {
            Ok((c, bytes)) => {
                if !bytes.starts_with(HEADER.as_bytes()) {
                    // Written before it had a checksum: both copies get one now (best effort).
                    let _ = c.save(dir);
                } else if std::fs::read(&second).ok().as_deref() != Some(&bytes[..]) {
                    let _ = insitu_flash::persist::write_atomic(&second, &bytes);
                }
                Ok(c)
            }
            Err(
                e @ (DeviceError::NotADevice(_)
                | DeviceError::Flash(insitu_flash::FlashError::Corrupt { .. })),
            ) => {
                let Ok((c, bytes)) = read(dir, &second) else { return Err(e) };
                if first.exists() {
                    let _ = std::fs::rename(&first, dir.join("device.json.damaged"));
                }
                insitu_flash::persist::write_atomic(&first, &bytes)?;
                Ok(c)
            }
            Err(e) => Err(e),
        }
    }
}

/// One copy of the configuration, checked, and its bytes.
fn read(dir: &Path, path: &Path) -> Result<(DeviceConfig, Vec<u8>)> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(DeviceError::NotADevice(dir.to_path_buf()))
        }
        Err(e) => return Err(DeviceError::io(path, e)),
    };
    let corrupt = |detail: String| {
        DeviceError::Flash(insitu_flash::FlashError::Corrupt {
            what: "device configuration".into(),
            path: path.to_path_buf(),
            detail,
        })
    };
    let json = insitu_flash::persist::checked_body(HEADER, &bytes).map_err(corrupt)?;
    let c: DeviceConfig = serde_json::from_slice(json).map_err(|e| corrupt(e.to_string()))?;
    if c.format != FORMAT {
        return Err(DeviceError::Flash(insitu_flash::FlashError::Version {
            path: path.to_path_buf(),
            found: c.format,
            expected: FORMAT,
        }));
    }
    c.profile.validate()?;
    Ok((c, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> DeviceConfig {
        DeviceConfig::new(3, Profile::load("tiny").unwrap())
    }

    #[test]
    fn a_damaged_or_lost_first_copy_is_mended_from_the_second() {
        let dir = tempfile::tempdir().unwrap();
        config().save(dir.path()).unwrap();
        let first = dir.path().join(FILE);
        let good = std::fs::read(&first).unwrap();
        assert!(good.starts_with(HEADER.as_bytes()));
        // A digit changed under the checksum: mended, the damaged file kept.
        let bad = String::from_utf8(good.clone()).unwrap().replacen("\"id\": 3", "\"id\": 7", 1);
        std::fs::write(&first, &bad).unwrap();
        assert_eq!(DeviceConfig::load(dir.path()).unwrap().id, 3);
        assert_eq!(std::fs::read(&first).unwrap(), good);
        assert_eq!(std::fs::read_to_string(dir.path().join("device.json.damaged")).unwrap(), bad);
        // Gone: written again from the second copy.
        std::fs::remove_file(&first).unwrap();
        assert_eq!(DeviceConfig::load(dir.path()).unwrap().id, 3);
        assert_eq!(std::fs::read(&first).unwrap(), good);
        // Both damaged: the first's error, nothing written.
        std::fs::write(&first, &bad).unwrap();
        std::fs::write(dir.path().join(SECOND), &bad).unwrap();
        let e = DeviceConfig::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("checksum mismatch") && e.contains("device.json"), "{e}");
        // Neither there: not a device.
        std::fs::remove_file(&first).unwrap();
        std::fs::remove_file(dir.path().join(SECOND)).unwrap();
        assert!(matches!(DeviceConfig::load(dir.path()), Err(DeviceError::NotADevice(_))));
    }

    #[test]
    fn a_configuration_written_without_a_checksum_reads_and_gets_one() {
        let dir = tempfile::tempdir().unwrap();
        let json = serde_json::to_vec_pretty(&config()).unwrap();
        std::fs::write(dir.path().join(FILE), &json).unwrap();
        assert_eq!(DeviceConfig::load(dir.path()).unwrap().id, 3);
        for name in [FILE, SECOND] {
            let bytes = std::fs::read(dir.path().join(name)).unwrap();
            assert_eq!(insitu_flash::persist::checked_body(HEADER, &bytes).unwrap(), &json[..], "{name}");
            assert!(bytes.starts_with(HEADER.as_bytes()), "{name}");
        }
    }
}

//! A shuffle output's description in the catalog.

use insitu_kernels::columnar::RecordFormat;
use insitu_kernels::partition::PartitionHash;
use insitu_kernels::shuffle::{ChunkLayout, Codec};
use serde::{Deserialize, Serialize};

use crate::table::info::PartInfo;
use crate::table::schema::TableSchema;

/// What a shuffle wrote (`S#data` + `S#index` on every device) and how to rebuild its rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleInfo {
    pub source: String,
    pub schema: TableSchema,
    pub key: usize,
    /// Per device part: how its key column is stored (for rebuilding rows).
    pub parts: Vec<PartInfo>,
    /// The row format of the source's row-wise parts (the key column becomes field 0 of a record).
    pub record_format: RecordFormat,
    pub partitions: u32,
    pub layout: ChunkLayout,
    /// How chunks are stored (outputs written before the choice existed are LZ4).
    #[serde(default)]
    pub codec: Codec,
    pub hash: PartitionHash,
    pub keys: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shuffle_stored_before_the_codec_choice_reads_as_lz4() {
        let info = ShuffleInfo {
            source: "t".into(),
            schema: TableSchema::default(),
            key: 0,
            parts: vec![],
            record_format: RecordFormat::parse("f4").unwrap(),
            partitions: 4,
            layout: ChunkLayout::Column,
            codec: Codec::None,
            hash: PartitionHash::ZigzagFold,
            keys: vec!["k".into()],
        };
        let mut json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["codec"], "none");
        json.as_object_mut().unwrap().remove("codec");
        let old: ShuffleInfo = serde_json::from_value(json).unwrap();
        assert_eq!(old.codec, Codec::Lz4);
        assert_eq!(ShuffleInfo { codec: Codec::None, ..old }, info);
    }
}

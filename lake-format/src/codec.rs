//! The published schema's codec: `_schema/<dataset>.arrow` is an Arrow IPC
//! stream with a schema and no batches (pyarrow reads it with
//! `pyarrow.ipc.open_stream(...).schema`).

use arrow_schema::{ArrowError, Schema, SchemaRef};

/// `schema` as an Arrow IPC stream with no batches.
///
/// # Errors
/// The Arrow writer's error (it does not fail for schemas Persist makes).
pub fn encode_arrow_schema(schema: &Schema) -> Result<Vec<u8>, ArrowError> {
    let mut out = Vec::new();
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(&mut out, schema)?;
    writer.finish()?;
    drop(writer);
    Ok(out)
}

/// The Arrow schema of an Arrow IPC stream.
///
/// # Errors
/// The Arrow reader's error for bytes that are not an IPC stream.
pub fn decode_arrow_schema(bytes: &[u8]) -> Result<SchemaRef, ArrowError> {
    Ok(arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)?.schema())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_schema::{DataType, Field};

    use super::*;

    #[test]
    fn a_schema_round_trips_with_its_metadata() {
        let field = Field::new("a", DataType::Int64, true)
            .with_metadata(HashMap::from([("tributary.source".to_string(), "A".to_string())]));
        let schema = Schema::new_with_metadata(vec![field], HashMap::from([("tributary.version".into(), "3".into())]));
        let decoded = decode_arrow_schema(&encode_arrow_schema(&schema).expect("encode")).expect("decode");
        assert_eq!(decoded.as_ref(), &schema);
        assert!(decode_arrow_schema(b"not arrow").is_err());
    }
}

//! `persist-bench writer-cost`: what arrow-rs's Parquet writer costs per
//! top-level column of a file Persist wrote, with zstd level 1 and
//! uncompressed, so the converter's profile can be split by column
//! (docs/persist-bench.md, "Where the Parquet writer's time goes").

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// Options of `persist-bench writer-cost`.
#[derive(Debug, clap::Args)]
pub struct WriterCostOptions {
    /// A Parquet file Persist wrote (`persist-bench run-one --output`).
    #[arg(long)]
    pub input: PathBuf,
    /// Rows per `ArrowWriter::write` call: about one of the converter's
    /// chunks (1 MiB of text: 2,000-3,000 records of the bench pages).
    #[arg(long, default_value_t = 2_048)]
    pub batch_rows: usize,
    /// Timed writes per column and setting; the fastest is printed.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
}

/// Writes each top-level column of `options.input` alone to a file in the
/// system's temporary directory through `ArrowWriter`, with Persist's
/// writer settings (zstd level 1, the input's row-group size,
/// [`persist::DICTIONARY_PAGE_BYTES`]) and uncompressed, and prints a
/// Markdown table: seconds (fastest of `repeats`) and nanoseconds per leaf
/// value (the Parquet column chunks' `num_values`, nulls included).
///
/// # Errors
/// The input cannot be read, or a write fails.
pub fn run(options: &WriterCostOptions) -> anyhow::Result<()> {
    let file = std::fs::File::open(&options.input).with_context(|| format!("{}", options.input.display()))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
    let metadata = builder.metadata().clone();
    let row_group_rows = metadata.row_groups().first().map_or(131_072, |g| g.num_rows().max(1) as usize);
    let batches: Vec<RecordBatch> =
        builder.with_batch_size(options.batch_rows.max(1)).build()?.collect::<Result<_, _>>()?;
    let schema = batches.first().map(RecordBatch::schema).context("the input has no rows")?;
    let zstd = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1)?))
        .set_max_row_group_row_count(Some(row_group_rows))
        .set_dictionary_page_size_limit(persist::DICTIONARY_PAGE_BYTES)
        .build();
    let plain = zstd.clone().into_builder().set_compression(Compression::UNCOMPRESSED).build();
    let out = std::env::temp_dir().join(format!("persist-bench-writer-cost-{}.parquet", std::process::id()));
    println!("| column | leaf values | zstd 1 | uncompressed | ns per leaf value (zstd 1) |");
    println!("|---|---:|---:|---:|---:|");
    let (mut total_zstd, mut total_plain, mut total_values) = (0.0, 0.0, 0u64);
    for (index, field) in schema.fields().iter().enumerate() {
        let values: u64 = metadata
            .row_groups()
            .iter()
            .flat_map(|g| g.columns())
            .filter(|c| c.column_path().parts().first() == Some(field.name()))
            .map(|c| c.num_values() as u64)
            .sum();
        let fastest = |properties: &WriterProperties| -> anyhow::Result<f64> {
            let mut best = f64::MAX;
            for _ in 0..options.repeats.max(1) {
                let started = Instant::now();
                let one = schema.project(&[index])?;
                let mut writer =
                    ArrowWriter::try_new(std::fs::File::create(&out)?, one.into(), Some(properties.clone()))?;
                for batch in &batches {
                    writer.write(&batch.project(&[index])?)?;
                }
                writer.close()?;
                best = best.min(started.elapsed().as_secs_f64());
            }
            Ok(best)
        };
        let (with_zstd, without) = (fastest(&zstd)?, fastest(&plain)?);
        total_zstd += with_zstd;
        total_plain += without;
        total_values += values;
        println!(
            "| {} | {values} | {with_zstd:.3} s | {without:.3} s | {:.1} |",
            field.name(),
            with_zstd * 1e9 / values.max(1) as f64
        );
    }
    println!(
        "| all | {total_values} | {total_zstd:.3} s | {total_plain:.3} s | {:.1} |",
        total_zstd * 1e9 / total_values.max(1) as f64
    );
    let _ = std::fs::remove_file(&out);
    Ok(())
}

//! The integration tests of `tests`, linked as one binary (one link instead of 15); each
//! module is one former test file, its tests named `<module>::<test>`.

mod athena_local;
mod aws_completion;
mod aws_dashboard;
mod aws_iceberg;
mod aws_operations;
mod aws_pipeline;
mod aws_schedules;
mod aws_stream;
mod book;
mod contract_schemas;
mod drf_vendor;
mod iceberg;
mod iceberg_compact;
mod iceberg_merge;
mod independent_reader;
mod local_pipeline;
mod persist_readback;
mod readers;
mod replay;
mod request_cursor;
mod run_summary;
mod run_values;
mod secrets_in_logs;
mod stream_local;
mod table_evolution;
mod template_observability;
mod template_parameters;
mod template_topology;

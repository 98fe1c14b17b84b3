//! Driver for kafka-protocol's message generator (replaces its main.rs, which clones Kafka's repo):
//! `protocol_codegen <schema dir> <output messages dir>` writes `<output>/<name>.rs` per message
//! and `<output>.rs` (the module file with ApiKey, RequestKind, ...).
use failure::Error;
use std::fs;

pub mod generate_messages;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let (input, output) = (&args[1], &args[2]);
    fs::create_dir_all(output)?;
    let mut paths = Vec::new();
    for file in fs::read_dir(input)? {
        let path = file?.path();
        if path.extension() == Some("json".as_ref()) {
            paths.push(path);
        }
    }
    generate_messages::run(output.trim_end_matches('/'), paths)?;
    Ok(())
}

//! `bk-metadata`: cluster metadata tools (initnewcluster, metaformat, listbookies, listledgers);
//! see `metadata::cli`.

#![forbid(unsafe_code)]

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(metadata::cli::run(&args));
}

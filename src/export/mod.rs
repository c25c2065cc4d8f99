//! Exports of a scan directory to other tools' formats, read from the directory alone: MInference's
//! vertical-and-slash patterns (`minference`), DuoAttention's retrieval-head gates (`duoattention`), and a
//! Jupyter notebook that redraws the report with numpy (`notebook`).

pub mod duoattention;
pub mod minference;
pub mod notebook;

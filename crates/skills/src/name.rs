//! Skill names: the path of a skill's directory relative to its root,
//! `/`-separated (`utils/tiny-url`).

use crate::error::{Result, SkillsError};

/// Checks a name used to look up or write a skill: relative, `/`-separated,
/// no empty, `.` or `..` components, no `\`, no NUL, no drive prefix.
pub fn validate_name(name: &str) -> Result<()> {
    let refuse = |reason| Err(SkillsError::InvalidName { name: name.to_owned(), reason });
    if name.is_empty() {
        return refuse("empty");
    }
    if name.contains('\\') {
        return refuse("contains `\\`");
    }
    if name.contains('\0') {
        return refuse("contains NUL");
    }
    if name.starts_with('/') || name.starts_with('~') {
        return refuse("absolute path");
    }
    if name.len() >= 2 && name.as_bytes()[1] == b':' {
        return refuse("drive prefix");
    }
    for component in name.split('/') {
        match component {
            "" => return refuse("empty path component"),
            "." | ".." => return refuse("`.` or `..` component"),
            _ if component.starts_with('.') => return refuse("hidden path component"),
            _ if component.len() > MAX_COMPONENT_BYTES => return refuse("a path component is over 255 bytes"),
            _ => {}
        }
    }
    if name.split('/').count() > MAX_NAME_COMPONENTS {
        return refuse("more than 9 path components: the catalog does not look that deep");
    }
    Ok(())
}

/// Longest name component: what a file name may hold on common file
/// systems (ext4, APFS, NTFS).
pub const MAX_COMPONENT_BYTES: usize = 255;
/// Most components of a name: discovery reads skill directories down to
/// [`crate::constants::MAX_DISCOVERY_DEPTH`] levels below the root's own
/// entries, so a deeper skill could be written and never be seen.
pub const MAX_NAME_COMPONENTS: usize = crate::constants::MAX_DISCOVERY_DEPTH + 1;

/// Sanitises a name for a new skill: lower case, runs of anything but
/// letters, digits and `/` become one `-`, each component trimmed of `-`,
/// empty components dropped. Returns an error when nothing is left.
pub fn sanitize_name(raw: &str) -> Result<String> {
    let mut components = Vec::new();
    for component in raw.split(['/', '\\']) {
        let mut out = String::new();
        let mut pending_hyphen = false;
        for ch in component.chars().flat_map(char::to_lowercase) {
            if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
                if pending_hyphen && !out.is_empty() {
                    out.push('-');
                }
                pending_hyphen = false;
                out.push(ch);
            } else {
                pending_hyphen = true;
            }
        }
        if !out.is_empty() {
            components.push(out);
        }
    }
    if components.is_empty() {
        return Err(SkillsError::InvalidName { name: raw.to_owned(), reason: "no letters or digits" });
    }
    let name = components.join("/");
    validate_name(&name)?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_rejected(name: &str, reason: &str) {
        match validate_name(name) {
            Err(SkillsError::InvalidName { reason: actual, .. }) => assert_eq!(actual, reason, "{name:?}"),
            other => panic!("{name:?}: expected rejection, got {other:?}"),
        }
    }

    #[test]
    fn rejects_traversal_and_absolute_names() {
        check_rejected("", "empty");
        check_rejected("../etc", "`.` or `..` component");
        check_rejected("a/../../b", "`.` or `..` component");
        check_rejected("./a", "`.` or `..` component");
        check_rejected("a\\b", "contains `\\`");
        check_rejected("/etc/passwd", "absolute path");
        check_rejected("~/x", "absolute path");
        check_rejected("C:stuff", "drive prefix");
        check_rejected("a//b", "empty path component");
        check_rejected("a/", "empty path component");
        check_rejected(".hidden", "hidden path component");
        check_rejected("a\0b", "contains NUL");
        check_rejected(&"x".repeat(256), "a path component is over 255 bytes");
        check_rejected(&format!("a/{}", "é".repeat(128)), "a path component is over 255 bytes");
        assert!(validate_name(&"x".repeat(255)).is_ok());
        check_rejected(&["d"; 10].join("/"), "more than 9 path components: the catalog does not look that deep");
        assert!(validate_name(&["d"; MAX_NAME_COMPONENTS].join("/")).is_ok());
        assert_eq!(MAX_NAME_COMPONENTS, 9, "the refusal's text names 9");
        assert!(validate_name("utils/tiny-url").is_ok());
        assert!(validate_name("навык").is_ok());
    }

    #[test]
    fn sanitize_lowercases_and_hyphenates() {
        assert_eq!(sanitize_name("My Cool_Skill!").unwrap(), "my-cool-skill");
        assert_eq!(sanitize_name("Utils/Tiny URL").unwrap(), "utils/tiny-url");
        assert_eq!(sanitize_name("../../etc/passwd").unwrap(), "etc/passwd");
        assert_eq!(sanitize_name("a\\b").unwrap(), "a/b");
        assert!(matches!(sanitize_name("!!!/.."), Err(SkillsError::InvalidName { .. })));
    }
}

//! Content filter languages (tags, JMS SQL selectors). Under construction.

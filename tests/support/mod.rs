//! Shared test support: loopback-only servers the integration tests run against.

#![allow(dead_code)]

pub mod apt;
pub mod config;
pub mod dns;
pub mod proxy;
pub mod registry;
pub mod seaweed;
pub mod serve;
pub mod tarball;
pub mod upstream;

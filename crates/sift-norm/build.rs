//! Builds the real NORM sessions when `norm-sys` found libnorm, and
//! sessions that refuse with a clear error when it did not.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(norm_unavailable)");
    println!("cargo:rerun-if-env-changed=DEP_NORM_AVAILABLE");
    if std::env::var("DEP_NORM_AVAILABLE").as_deref() != Ok("1") {
        println!("cargo:rustc-cfg=norm_unavailable");
    }
}

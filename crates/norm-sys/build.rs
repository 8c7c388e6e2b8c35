//! Links the system's libnorm (Debian `libnorm-dev`). The bindings are
//! committed (`src/bindings.rs`, from `scripts/norm-bindgen`), so no
//! bindgen or libclang runs here.
//!
//! A machine without the library still builds Sift: this script then links
//! nothing and tells dependents (`DEP_NORM_AVAILABLE=0`), and `sift-norm`
//! answers every session with an error that says to install libnorm-dev.
//! `scripts/test` installs it, so the tests always use the real library.

use std::path::Path;

/// Where Debian and most distributions put the shared library.
const LIBRARY_DIRS: [&str; 4] =
    ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=NORM_LIB_DIR");
    println!("cargo:rerun-if-env-changed=SIFT_NORM_DISABLE");
    let mut dirs: Vec<String> = LIBRARY_DIRS.iter().map(|dir| dir.to_string()).collect();
    if let Ok(dir) = std::env::var("NORM_LIB_DIR") {
        dirs.insert(0, dir);
    }
    // SIFT_NORM_DISABLE=1 builds as a machine without libnorm would.
    let disabled = std::env::var("SIFT_NORM_DISABLE").as_deref() == Ok("1");
    let found = dirs.iter().find(|dir| Path::new(dir).join("libnorm.so").exists()).filter(|_| !disabled);
    match found {
        Some(dir) => {
            println!("cargo:rustc-link-search=native={dir}");
            // The shared library pulls in its own C++ runtime and protokit.
            println!("cargo:rustc-link-lib=dylib=norm");
            println!("cargo:available=1");
        }
        None => {
            println!("cargo:warning=libnorm not found (apt-get install libnorm-dev): multicast will report it is unavailable");
            println!("cargo:available=0");
        }
    }
}

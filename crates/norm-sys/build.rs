//! Links the system's libnorm (Debian `libnorm-dev`). The bindings are
//! committed (`src/bindings.rs`, from `scripts/norm-bindgen`), so no
//! bindgen or libclang runs here.

fn main() {
    // The shared library pulls in its own C++ runtime and protokit.
    println!("cargo:rustc-link-lib=dylib=norm");
    println!("cargo:rerun-if-changed=build.rs");
}

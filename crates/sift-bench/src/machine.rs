//! What machine a report was measured on.

use serde::{Deserialize, Serialize};

/// The machine a run measured: enough to tell two reports' machines apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// Logical CPUs this process may use.
    pub cpus: usize,
    /// The CPU model, from `/proc/cpuinfo` where it is readable.
    pub cpu_model: Option<String>,
    /// Operating system, with the kernel release where it is known.
    pub os: String,
}

impl Machine {
    /// The machine this process runs on.
    pub fn detect() -> Machine {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|text| cpu_model(&text));
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok();
        let os = match kernel.as_deref().map(str::trim) {
            Some(release) if !release.is_empty() => format!("{} {release}", std::env::consts::OS),
            _ => std::env::consts::OS.to_string(),
        };
        Machine { cpus, cpu_model, os }
    }

    /// One line: `2 CPUs, AMD EPYC 7B13, linux 6.1.0`.
    pub fn describe(&self) -> String {
        let plural = if self.cpus == 1 { "" } else { "s" };
        match &self.cpu_model {
            Some(model) => format!("{} CPU{plural}, {model}, {}", self.cpus, self.os),
            None => format!("{} CPU{plural}, {}", self.cpus, self.os),
        }
    }
}

/// The first `model name` (x86) or `Processor`/`cpu model` (other
/// architectures) line of a `/proc/cpuinfo` text.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let key = key.trim();
        let wanted = key == "model name" || key == "Processor" || key == "cpu model";
        (wanted && !value.trim().is_empty()).then(|| value.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_name_line_gives_the_cpu_model() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n";
        assert_eq!(cpu_model(text).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn detection_finds_at_least_one_cpu_and_describes_it() {
        let machine = Machine::detect();
        assert!(machine.cpus >= 1);
        assert!(machine.describe().contains(std::env::consts::OS), "{}", machine.describe());
    }
}

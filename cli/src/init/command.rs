//! `tributary init`'s command line: its flags, the credentials they name,
//! and the spec file written once everything else has succeeded.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use contracts::Auth;

use super::{InitError, InitOptions, default_name, init};

/// `tributary init URL [--auth KIND --secret ID] [--dataset NAME] [--out FILE]`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The vendor endpoint, as page 1 is called (e.g.
    /// `https://api.vendor.example/v1/customers?limit=100`).
    pub url: String,
    /// Credentials: `bearer`, `basic`, `api_key` (with --header or
    /// --query-param) or `oauth2_client_credentials` (with --token-url and
    /// --client-id), the value read by --secret's id.
    #[arg(long, value_name = "KIND", requires = "secret",
          value_parser = ["bearer", "basic", "api_key", "oauth2_client_credentials"])]
    pub auth: Option<String>,
    /// Secret id of the credential: its value comes from
    /// `TRIBUTARY_SECRET_<ID>` or `<lake>/_secrets.json`, never the
    /// command line, and is never printed or written.
    #[arg(long, value_name = "ID", requires = "auth")]
    pub secret: Option<String>,
    /// `api_key`: the header carrying the key (default `x-api-key`).
    #[arg(long, value_name = "NAME", conflicts_with = "query_param")]
    pub header: Option<String>,
    /// `api_key`: the query parameter carrying the key instead.
    #[arg(long, value_name = "NAME")]
    pub query_param: Option<String>,
    /// `bearer`: the word before the token (default `Bearer`; `Token` for
    /// Django REST Framework).
    #[arg(long, value_name = "WORD")]
    pub scheme: Option<String>,
    /// `oauth2_client_credentials`: the token endpoint.
    #[arg(long, value_name = "URL")]
    pub token_url: Option<url::Url>,
    /// `oauth2_client_credentials`: the client id (not a secret).
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// `oauth2_client_credentials`: the scopes, space-separated.
    #[arg(long)]
    pub scope: Option<String>,
    /// Pipeline and dataset name (default: the URL's last path segment).
    #[arg(long, value_name = "NAME")]
    pub dataset: Option<String>,
    /// The spec file to write (default: `<dataset>.yaml`); an existing
    /// file is kept unless `--force`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite `--out` if it exists.
    #[arg(long)]
    pub force: bool,
    /// Let the calls reach loopback addresses (a vendor on this machine);
    /// the spec then allows them too.
    #[arg(long)]
    pub allow_loopback: bool,
    /// Let the calls reach private addresses (a vendor in your network).
    #[arg(long)]
    pub allow_private: bool,
    /// The lake whose `_secrets.json` holds local secrets (as `tributary run`).
    #[arg(long, default_value = "lake")]
    pub lake: PathBuf,
}

impl InitArgs {
    /// The credentials the flags name.
    fn credentials(&self) -> Result<Option<Auth>, InitError> {
        let (Some(kind), Some(secret_id)) = (self.auth.as_deref(), self.secret.clone()) else { return Ok(None) };
        let missing = |flag: &str| InitError::Input(format!("--auth {kind} needs {flag}"));
        Ok(Some(match kind {
            "bearer" => Auth::Bearer { secret_id, scheme: self.scheme.clone() },
            "basic" => Auth::Basic { secret_id },
            "api_key" => Auth::ApiKey {
                secret_id,
                header: self.query_param.is_none().then(|| self.header.clone().unwrap_or_else(|| "x-api-key".into())),
                query_param: self.query_param.clone(),
            },
            _ => Auth::OAuth2ClientCredentials {
                token_url: self.token_url.clone().ok_or_else(|| missing("--token-url URL"))?,
                client_id: self.client_id.clone().ok_or_else(|| missing("--client-id ID"))?,
                secret_id,
                scope: self.scope.clone(),
            },
        }))
    }

    /// Where the spec goes: `--out`, else `<dataset>.yaml`.
    fn out(&self) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            let name = self.dataset.clone().or_else(|| self.url.parse().ok().map(|url| default_name(&url)));
            PathBuf::from(format!("{}.yaml", name.unwrap_or_else(|| "vendor".into())))
        })
    }
}

/// Runs `tributary init`: infers the spec, prints the report and the spec,
/// and writes the spec file, only when everything succeeded.
///
/// # Errors
/// An existing `--out` without `--force`, an [`InitError`], or the file
/// that cannot be written.
pub async fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    let out = args.out();
    if out.exists() && !args.force {
        anyhow::bail!("{} exists: name another --out, or pass --force to replace it", out.display());
    }
    let options = InitOptions {
        url: args.url.clone(),
        auth: args.credentials()?,
        dataset: args.dataset.clone(),
        allow_loopback: args.allow_loopback,
        allow_private: args.allow_private,
        secrets_file: args.lake.join("_secrets.json"),
    };
    let inferred = init(&options).await?;
    write_atomically(&out, &inferred.yaml)?;
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", inferred.report)?;
    writeln!(stdout, "\nspec, written to {}:\n", out.display())?;
    write!(stdout, "{}", inferred.yaml)?;
    writeln!(stdout, "\nnext: tributary run {} --lake {}", out.display(), args.lake.display())?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to `path` through a file beside it, renamed into place.
fn write_atomically(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".init-partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, text).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

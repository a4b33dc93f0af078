"""The gitleaks rule catalogue as data for `catalogue.py`: for each rule of
gitleaks' default configuration (`config/gitleaks.toml`, generated from
`cmd/generate/config/rules/*.go`), the rule id, the identifier its own tests
wrap a sample secret in (`utils.GenerateSampleSecrets(identifier, secret)`)
and the shape of the secret as a regular expression (Python syntax, written
here from the rule's published format; only used to generate values).

Rules keyed on a file path alone (`pkcs12-file`) and the catch-all
`generic-api-key` are listed separately in `catalogue.py`.
"""

HEX = "[a-f0-9]"
UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

# (rule id, identifier, secret shape)
GITLEAKS = [
    ("1password-secret-key", "1password", r"A3-[A-Z0-9]{6}-[A-Z0-9]{11}-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"),
    ("1password-service-account-token", "1password", r"ops_eyJ[a-zA-Z0-9+/]{250,260}={0,3}"),
    ("adafruit-api-key", "adafruit", r"[a-z0-9_-]{32}"),
    ("adobe-client-id", "adobe", r"[a-f0-9]{32}"),
    ("adobe-client-secret", "adobe", r"p8e-[a-z0-9]{32}"),
    ("age-secret-key", "age", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("airtable-api-key", "airtable", r"[a-z0-9]{17}"),
    ("airtable-personnal-access-token", "airtable", r"pat[a-zA-Z0-9]{14}\.[a-f0-9]{64}"),
    ("algolia-api-key", "algolia", r"[a-z0-9]{32}"),
    ("alibaba-access-key-id", "alibaba", r"LTAI[a-z0-9]{20}"),
    ("alibaba-secret-key", "alibaba", r"[a-z0-9]{30}"),
    ("anthropic-admin-api-key", "anthropic", r"sk-ant-admin01-[a-zA-Z0-9_-]{93}AA"),
    ("anthropic-api-key", "anthropic", r"sk-ant-api03-[a-zA-Z0-9_-]{93}AA"),
    ("artifactory-api-key", "artifactory", r"AKCp[A-Za-z0-9]{69}"),
    ("artifactory-reference-token", "artifactory", r"cmVmd[A-Za-z0-9]{59}"),
    ("asana-client-id", "asana", r"[0-9]{16}"),
    ("asana-client-secret", "asana", r"[a-z0-9]{32}"),
    ("atlassian-api-token", "atlassian", r"[a-z0-9]{20}[a-f0-9]{4}"),
    ("atlassian-api-token-v2", "confluence", r"ATATT3[A-Za-z0-9_=-]{186}"),
    ("authress-service-client-access-key", "authress", r"(sc|ext|scauth|authress)_[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc_[a-z0-9-]{10,32}\.[a-z0-9+/_=-]{30,120}"),
    ("aws-access-token", "aws", r"(A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"),
    ("azure-ad-client-secret", "azure", r"[a-zA-Z0-9_~.]{3}[0-9]Q~[a-zA-Z0-9_~.-]{31,34}"),
    ("beamer-api-token", "beamer", r"b_[a-z0-9=_-]{44}"),
    ("bitbucket-client-id", "bitbucket", r"[a-z0-9]{32}"),
    ("bitbucket-client-secret", "bitbucket", r"[a-z0-9=_-]{64}"),
    ("bittrex-access-key", "bittrex", r"[a-z0-9]{32}"),
    ("bittrex-secret-key", "bittrex", r"[a-z0-9]{32}"),
    ("cisco-meraki-api-key", "meraki", r"[0-9a-f]{40}"),
    ("clickhouse-cloud-api-secret-key", "clickhouse", r"4b1d[A-Za-z0-9]{38}"),
    ("clojars-api-token", "clojars", r"CLOJARS_[a-z0-9]{60}"),
    ("cloudflare-api-key", "cloudflare", r"[a-z0-9_-]{40}"),
    ("cloudflare-global-api-key", "cloudflare", r"[a-f0-9]{37}"),
    ("cloudflare-origin-ca-key", "cloudflare", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    ("codecov-access-token", "codecov", r"[a-z0-9]{32}"),
    ("cohere-api-token", "cohere", r"[a-zA-Z0-9]{40}"),
    ("coinbase-access-token", "coinbase", r"[a-z0-9_-]{64}"),
    ("confluent-access-token", "confluent", r"[a-z0-9]{16}"),
    ("confluent-secret-key", "confluent", r"[a-z0-9]{64}"),
    ("contentful-delivery-api-token", "contentful", r"[a-z0-9=_-]{43}"),
    ("databricks-api-token", "databricks", r"dapi[a-f0-9]{32}(-[0-9])?"),
    ("datadog-access-token", "datadog", r"[a-z0-9]{40}"),
    ("defined-networking-api-token", "dnkey", r"dnkey-[a-z0-9=_-]{26}-[a-z0-9=_-]{52}"),
    ("digitalocean-access-token", "digitalocean", r"doo_v1_[a-f0-9]{64}"),
    ("digitalocean-pat", "digitalocean", r"dop_v1_[a-f0-9]{64}"),
    ("digitalocean-refresh-token", "digitalocean", r"dor_v1_[a-f0-9]{64}"),
    ("discord-api-token", "discord", r"[a-f0-9]{64}"),
    ("discord-client-id", "discord", r"[0-9]{18}"),
    ("discord-client-secret", "discord", r"[a-z0-9=_-]{32}"),
    ("doppler-api-token", "doppler", r"dp\.pt\.[a-z0-9]{43}"),
    ("droneci-access-token", "droneci", r"[a-z0-9]{32}"),
    ("dropbox-api-token", "dropbox", r"[a-z0-9]{15}"),
    ("dropbox-long-lived-api-token", "dropbox", r"[a-z0-9]{11}AAAAAAAAAA[a-z0-9_=-]{43}"),
    ("dropbox-short-lived-api-token", "dropbox", r"sl\.[a-z0-9_=-]{135}"),
    ("duffel-api-token", "duffel", r"duffel_(test|live)_[a-z0-9_=-]{43}"),
    ("dynatrace-api-token", "dynatrace", r"dt0c01\.[a-z0-9]{24}\.[a-z0-9]{64}"),
    ("easypost-api-token", "easypost", r"EZAK[a-z0-9]{54}"),
    ("easypost-test-api-token", "easypost", r"EZTK[a-z0-9]{54}"),
    ("etsy-access-token", "etsy", r"[a-z0-9]{24}"),
    ("facebook-access-token", "facebook", r"[0-9]{15,16}(\||%)[0-9a-z_-]{27,40}"),
    ("facebook-page-access-token", "facebook", r"EAA[MC][a-z0-9]{100,120}"),
    ("facebook-secret", "facebook", r"[a-f0-9]{32}"),
    ("fastly-api-token", "fastly", r"[a-z0-9=_-]{32}"),
    ("finicity-api-token", "finicity", r"[a-f0-9]{32}"),
    ("finicity-client-secret", "finicity", r"[a-z0-9]{20}"),
    ("finnhub-access-token", "finnhub", r"[a-z0-9]{20}"),
    ("flickr-access-token", "flickr", r"[a-z0-9]{32}"),
    ("flutterwave-encryption-key", "flutterwave", r"FLWSECK_TEST-[a-h0-9]{12}"),
    ("flutterwave-public-key", "flutterwave", r"FLWPUBK_TEST-[a-h0-9]{32}-X"),
    ("flutterwave-secret-key", "flutterwave", r"FLWSECK_TEST-[a-h0-9]{32}-X"),
    ("flyio-access-token", "flyio", r"(fo1_[a-zA-Z0-9_-]{43}|fm1[ar]_[a-zA-Z0-9+/]{100,140}={0,3}|fm2_[a-zA-Z0-9+/]{100,140}={0,3})"),
    ("frameio-api-token", "frameio", r"fio-u-[a-z0-9_=-]{64}"),
    ("freemius-secret-key", "freemius", r"sk_[a-zA-Z0-9!@#%^&*+=]{29}"),
    ("freshbooks-access-token", "freshbooks", r"[a-z0-9]{64}"),
    ("gcp-api-key", "gcp", r"AIza[a-zA-Z0-9_-]{35}"),
    ("github-app-token", "github", r"(ghu|ghs)_[0-9a-zA-Z]{36}"),
    ("github-fine-grained-pat", "github", r"github_pat_[a-zA-Z0-9_]{82}"),
    ("github-oauth", "github", r"gho_[0-9a-zA-Z]{36}"),
    ("github-pat", "github", r"ghp_[0-9a-zA-Z]{36}"),
    ("github-refresh-token", "github", r"ghr_[0-9a-zA-Z]{36}"),
    ("gitlab-cicd-job-token", "gitlab", r"glcbt-[0-9a-zA-Z]{1,5}_[0-9a-zA-Z_-]{20}"),
    ("gitlab-deploy-token", "gitlab", r"gldt-[0-9a-zA-Z_-]{20}"),
    ("gitlab-feature-flag-client-token", "gitlab", r"glffct-[0-9a-zA-Z_-]{20}"),
    ("gitlab-feed-token", "gitlab", r"glft-[0-9a-zA-Z_-]{20}"),
    ("gitlab-incoming-mail-token", "gitlab", r"glimt-[0-9a-zA-Z_-]{25}"),
    ("gitlab-kubernetes-agent-token", "gitlab", r"glagent-[0-9a-zA-Z_-]{50}"),
    ("gitlab-oauth-app-secret", "gitlab", r"gloas-[0-9a-zA-Z_-]{64}"),
    ("gitlab-pat", "gitlab", r"glpat-[a-zA-Z0-9_-]{20}"),
    ("gitlab-pat-routable", "gitlab", r"glpat-[0-9a-zA-Z_-]{27,60}\.[0-9a-z]{2}[0-9a-z]{7}"),
    ("gitlab-ptt", "gitlab", r"glptt-[0-9a-f]{40}"),
    ("gitlab-rrt", "gitlab", r"GR1348941[a-zA-Z0-9_-]{20}"),
    ("gitlab-runner-authentication-token", "gitlab", r"glrt-[0-9a-zA-Z_-]{20}"),
    ("gitlab-runner-authentication-token-routable", "gitlab", r"glrt-t[0-9]_[0-9a-zA-Z_-]{27,60}\.[0-9a-z]{2}[0-9a-z]{7}"),
    ("gitlab-scim-token", "gitlab", r"glsoat-[0-9a-zA-Z_-]{20}"),
    ("gitlab-session-cookie", "gitlab", r"_gitlab_session=[0-9a-z]{32}"),
    ("gitter-access-token", "gitter", r"[a-z0-9_-]{40}"),
    ("gocardless-api-token", "gocardless", r"live_[a-z0-9_=-]{40}"),
    ("grafana-api-key", "grafana", r"eyJrIjoi[A-Za-z0-9]{70,100}={0,3}"),
    ("grafana-cloud-api-token", "grafana", r"glc_[A-Za-z0-9+/]{32,100}={0,3}"),
    ("grafana-service-account-token", "grafana", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    ("harness-api-key", "harness", r"(pat|sat)\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9]{24}\.[a-zA-Z0-9]{20}"),
    ("hashicorp-tf-api-token", "hashicorp", r"[a-z0-9]{14}\.atlasv1\.[a-z0-9_=-]{60,70}"),
    ("hashicorp-tf-password", "administrator_login", r"[a-z0-9=_-]{8,20}"),
    ("heroku-api-key", "heroku", UUID),
    ("heroku-api-key-v2", "heroku", r"HRKU-AA[0-9a-zA-Z_-]{58}"),
    ("hubspot-api-key", "hubspot", r"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}"),
    ("huggingface-access-token", "huggingface", r"hf_[a-zA-Z]{34}"),
    ("huggingface-organization-api-token", "huggingface", r"api_org_[a-zA-Z]{34}"),
    ("infracost-api-token", "infracost", r"ico-[a-zA-Z0-9]{32}"),
    ("intercom-api-key", "intercom", r"[a-z0-9=_-]{60}"),
    ("intra42-client-secret", "intra42", r"s-s4t2(ud|af)-[abcdef0123456789]{64}"),
    ("jfrog-api-key", "jfrog", r"[a-z0-9]{73}"),
    ("jfrog-identity-token", "jfrog", r"[a-z0-9]{64}"),
    ("jwt", "jwt", r"eyJ[a-zA-Z0-9]{17,40}\.eyJ[a-zA-Z0-9/_-]{17,80}\.[a-zA-Z0-9/_-]{10,60}"),
    ("jwt-base64", "jwt", r"ZXlKaGJHY2lPaU[a-zA-Z0-9+/]{60,120}={0,2}"),
    ("kraken-access-token", "kraken", r"[a-z0-9/=_+-]{80,90}"),
    ("kucoin-access-token", "kucoin", r"[a-f0-9]{24}"),
    ("kucoin-secret-key", "kucoin", UUID),
    ("launchdarkly-access-token", "launchdarkly", r"[a-z0-9=_-]{40}"),
    ("linear-api-key", "linear", r"lin_api_[a-z0-9]{40}"),
    ("linear-client-secret", "linear", r"[a-f0-9]{32}"),
    ("linkedin-client-id", "linkedin", r"[a-z0-9]{14}"),
    ("linkedin-client-secret", "linkedin", r"[a-z0-9]{16}"),
    ("lob-api-key", "lob", r"(live|test)_[a-f0-9]{35}"),
    ("lob-pub-api-key", "lob", r"(test|live)_pub_[a-f0-9]{31}"),
    ("mailchimp-api-key", "mailchimp", r"[a-f0-9]{32}-us[0-9]{2}"),
    ("mailgun-private-api-token", "mailgun", r"key-[a-f0-9]{32}"),
    ("mailgun-pub-key", "mailgun", r"pubkey-[a-f0-9]{32}"),
    ("mailgun-signing-key", "mailgun", r"[a-h0-9]{32}-[a-h0-9]{8}-[a-h0-9]{8}"),
    ("mapbox-api-token", "mapbox", r"pk\.[a-z0-9]{60}\.[a-z0-9]{22}"),
    ("mattermost-access-token", "mattermost", r"[a-z0-9]{26}"),
    ("maxmind-license-key", "maxmind", r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk"),
    ("messagebird-api-token", "messagebird", r"[a-z0-9]{25}"),
    ("messagebird-client-id", "messagebird", UUID),
    ("microsoft-teams-webhook", "teams", r"https://[a-z0-9]{5,12}\.webhook\.office\.com/webhookb2/[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}@[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}/IncomingWebhook/[a-z0-9]{32}/[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}"),
    ("netlify-access-token", "netlify", r"[a-z0-9=_-]{40,46}"),
    ("new-relic-browser-api-token", "new-relic", r"NRJS-[a-f0-9]{19}"),
    ("new-relic-insert-key", "new-relic", r"NRII-[a-z0-9-]{32}"),
    ("new-relic-user-api-id", "new-relic", r"[a-z0-9]{64}"),
    ("new-relic-user-api-key", "new-relic", r"NRAK-[a-z0-9]{27}"),
    ("notion-api-token", "notion", r"ntn_[0-9]{11}[A-Za-z0-9]{35}"),
    ("npm-access-token", "npm", r"npm_[a-z0-9]{36}"),
    ("nytimes-access-token", "nytimes", r"[a-z0-9=_-]{32}"),
    ("octopus-deploy-api-key", "octopus", r"API-[A-Z0-9]{26}"),
    ("okta-access-token", "okta", r"00[a-zA-Z0-9_=-]{40}"),
    ("openai-api-key", "openai", r"sk-(proj|svcacct|admin)-[A-Za-z0-9_-]{58}T3BlbkFJ[A-Za-z0-9_-]{58}"),
    ("openai-api-key-legacy", "openai", r"sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20}"),
    ("openshift-user-token", "openshift", r"sha256~[a-zA-Z0-9_-]{43}"),
    ("perplexity-api-key", "perplexity", r"pplx-[a-zA-Z0-9]{48}"),
    ("plaid-api-token", "plaid", r"access-(sandbox|development|production)-" + UUID),
    ("plaid-client-id", "plaid", r"[a-z0-9]{24}"),
    ("plaid-secret-key", "plaid", r"[a-z0-9]{30}"),
    ("planetscale-api-token", "planetscale", r"pscale_tkn_[a-zA-Z0-9_=.-]{32,64}"),
    ("planetscale-oauth-token", "planetscale", r"pscale_oauth_[a-zA-Z0-9_=.-]{32,64}"),
    ("planetscale-password", "planetscale", r"pscale_pw_[a-zA-Z0-9_=.-]{32,64}"),
    ("postman-api-token", "postman", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    ("prefect-api-token", "prefect", r"pnu_[a-zA-Z0-9]{36}"),
    ("privateai-api-token", "private-ai", r"[a-z0-9]{32}"),
    ("pulumi-api-token", "pulumi", r"pul-[a-f0-9]{40}"),
    ("pypi-upload-token", "pypi", r"pypi-AgEIcHlwaS5vcmc[a-zA-Z0-9_-]{50,120}"),
    ("rapidapi-access-token", "rapidapi", r"[a-z0-9_-]{50}"),
    ("readme-api-token", "readme", r"rdme_[a-z0-9]{70}"),
    ("rubygems-api-token", "rubygems", r"rubygems_[a-f0-9]{48}"),
    ("scalingo-api-token", "scalingo", r"tk-us-[a-zA-Z0-9_-]{48}"),
    ("sendbird-access-id", "sendbird", UUID),
    ("sendbird-access-token", "sendbird", r"[a-f0-9]{40}"),
    ("sendgrid-api-token", "sendgrid", r"SG\.[a-z0-9=_.-]{66}"),
    ("sendinblue-api-token", "sendinblue", r"xkeysib-[a-f0-9]{64}-[a-z0-9]{16}"),
    ("sentry-access-token", "sentry", r"[a-f0-9]{64}"),
    ("sentry-org-token", "sentry", r"sntrys_eyJpYXQiO[a-zA-Z0-9+/]{10,60}LCJyZWdpb25fdXJs[a-zA-Z0-9+/]{10,60}_[a-zA-Z0-9+/]{43}"),
    ("sentry-user-token", "sentry", r"sntryu_[a-f0-9]{64}"),
    ("settlemint-application-access-token", "settlemint", r"sm_aat_[a-zA-Z0-9]{16}"),
    ("settlemint-personal-access-token", "settlemint", r"sm_pat_[a-zA-Z0-9]{16}"),
    ("settlemint-service-access-token", "settlemint", r"sm_sat_[a-zA-Z0-9]{16}"),
    ("shippo-api-token", "shippo", r"shippo_(live|test)_[a-fA-F0-9]{40}"),
    ("shopify-access-token", "shopify", r"shpat_[a-fA-F0-9]{32}"),
    ("shopify-custom-access-token", "shopify", r"shpca_[a-fA-F0-9]{32}"),
    ("shopify-private-app-access-token", "shopify", r"shppa_[a-fA-F0-9]{32}"),
    ("shopify-shared-secret", "shopify", r"shpss_[a-fA-F0-9]{32}"),
    ("sidekiq-secret", "BUNDLE_ENTERPRISE__CONTRIBSYS__COM", r"[a-f0-9]{8}:[a-f0-9]{8}"),
    ("sidekiq-sensitive-url", "sidekiq", r"https://[a-f0-9]{8}:[a-f0-9]{8}@(gems|enterprise)\.contribsys\.com/"),
    ("slack-app-token", "slack", r"xapp-[0-9]-[A-Z0-9]{10,12}-[0-9]{10,13}-[a-z0-9]{60,64}"),
    ("slack-bot-token", "slack", r"xoxb-[0-9]{10,13}-[0-9]{10,13}-[a-zA-Z0-9]{24}"),
    ("slack-config-access-token", "slack", r"xoxe\.xox[bp]-[0-9]-[A-Z0-9]{163,166}"),
    ("slack-config-refresh-token", "slack", r"xoxe-[0-9]-[A-Z0-9]{146}"),
    ("slack-legacy-bot-token", "slack", r"xoxb-[0-9]{8,14}-[a-zA-Z0-9]{18,26}"),
    ("slack-legacy-token", "slack", r"xox[os]-[0-9]{5,12}-[0-9]{5,12}-[0-9]{5,12}-[a-fA-F0-9]{16,32}"),
    ("slack-legacy-workspace-token", "slack", r"xox[ar]-([0-9]-)?[0-9a-zA-Z]{8,48}"),
    ("slack-user-token", "slack", r"xox[pe](-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}"),
    ("slack-webhook-url", "slack", r"https://hooks\.slack\.com/(services|workflows|triggers)/[A-Za-z0-9+/]{43,56}"),
    ("snyk-api-token", "snyk_api", UUID),
    ("sonar-api-token", "sonar", r"[a-z0-9=_-]{40}"),
    ("sourcegraph-access-token", "sourcegraph", r"(sgp_[a-fA-F0-9]{16}_[a-fA-F0-9]{40}|sgp_[a-fA-F0-9]{40}|sgp_local_[a-fA-F0-9]{40}|[a-fA-F0-9]{40})"),
    ("square-access-token", "square", r"(EAAA|sq0atp-)[a-zA-Z0-9_-]{22,60}"),
    ("squarespace-access-token", "squarespace", UUID),
    ("stripe-access-token", "stripe", r"(sk|rk)_(test|live|prod)_[a-zA-Z0-9]{10,99}"),
    ("sumologic-access-id", "sumo", r"su[a-zA-Z0-9]{12}"),
    ("sumologic-access-token", "sumo", r"[a-z0-9]{64}"),
    ("telegram-bot-api-token", "telegram", r"[0-9]{5,16}:A[a-z0-9_-]{34}"),
    ("travisci-access-token", "travis", r"[a-z0-9]{22}"),
    ("twilio-api-key", "twilio", r"SK[0-9a-fA-F]{32}"),
    ("twitch-api-token", "twitch", r"[a-z0-9]{30}"),
    ("twitter-access-secret", "twitter", r"[a-z0-9]{45}"),
    ("twitter-access-token", "twitter", r"[0-9]{15,25}-[a-zA-Z0-9]{20,40}"),
    ("twitter-api-key", "twitter", r"[a-z0-9]{25}"),
    ("twitter-api-secret", "twitter", r"[a-z0-9]{50}"),
    ("twitter-bearer-token", "twitter", r"A{22}[a-zA-Z0-9%]{80,100}"),
    ("typeform-api-token", "typeform", r"tfp_[a-z0-9_.=-]{59}"),
    ("vault-batch-token", "vault", r"hvb\.[a-zA-Z0-9_-]{138,300}"),
    ("vault-service-token", "vault", r"(hvs\.[a-zA-Z0-9_-]{90,120}|s\.[a-z0-9]{24})"),
    ("yandex-access-token", "yandex", r"t1\.[A-Z0-9a-z_-]{20,80}={0,2}\.[A-Z0-9a-z_-]{86}={0,2}"),
    ("yandex-api-key", "yandex", r"AQVN[A-Za-z0-9_-]{35,38}"),
    ("yandex-aws-access-token", "yandex", r"YC[a-zA-Z0-9_-]{38}"),
    ("zendesk-secret-key", "zendesk", r"[a-z0-9]{40}"),
]


def GITLEAKS_LITERAL_FORMS(generate):
    """Rules whose positives are not `identifier = secret` assignments:
    written here as the shapes the rule's regex describes."""
    b64 = lambda n: generate(r"[A-Za-z0-9+/]{%d}" % n)  # noqa: E731
    key_body = "\n".join(b64(64) for _ in range(6))
    forms = {
        "private-key": [
            f"-----BEGIN {kind}PRIVATE KEY-----\n{key_body}\n-----END {kind}PRIVATE KEY-----"
            for kind in ("", "RSA ", "EC ", "OPENSSH ", "DSA ", "ENCRYPTED ", "PGP ")
        ],
        "curl-auth-header": [
            f'curl -H "Authorization: Bearer {generate(r"[A-Za-z0-9]{32}")}" https://api.example.org/v1/items',
            f"curl --header 'Authorization: Basic {b64(24)}' https://api.example.org",
            f'curl -X POST -H "X-Api-Key: {generate(r"[a-z0-9]{32}")}" https://api.example.org/x',
            f'curl -H "Authorization: Token {generate(r"[a-f0-9]{40}")}" https://api.example.org',
            f'curl https://api.example.org \\\n  -H "X-Auth-Token: {generate(r"[A-Za-z0-9_-]{36}")}"',
        ],
        "curl-auth-user": [
            f'curl -u "deploy:{generate(r"[A-Za-z0-9!@]{14}")}" https://example.org',
            f"curl --user admin:{generate(r'[A-Za-z0-9]{12}')} https://example.org",
            f"curl -u 'svc-bot:{generate(r'[A-Za-z0-9]{16}')}' https://registry.example.org",
            f"curl -s --user=ci:{generate(r'[A-Za-z0-9]{20}')} https://example.org/api",
        ],
        "kubernetes-secret-yaml": [
            f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  password: {b64(24)}\n  username: {b64(12)}",
            f"kind: Secret\ndata:\n  token: {b64(40)}",
        ],
        "nuget-config-password": [
            f'<add key="ClearTextPassword" value="{generate(r"[A-Za-z0-9!%]{14}")}" />',
            f'<add key="Password" value="{b64(60)}" />',
        ],
        "hashicorp-tf-password": [
            f'administrator_login_password = "{generate(r"[a-z0-9_-]{16}")}"',
            f'  password = "{generate(r"[a-z0-9=_-]{14}")}"',
        ],
        "generic-api-key": [
            f'api_key = "{generate(r"[A-Za-z0-9]{32}")}"',
            f'"client_secret": "{generate(r"[A-Za-z0-9_-]{40}")}"',
            f"AUTH_TOKEN={generate(r'[a-f0-9]{40}')}",
            f"access_token: {generate(r'[A-Za-z0-9.=_-]{48}')}",
            f'credentials = "{generate(r"[a-z0-9][a-z0-9+/]{30}=")}"',
            f"private-key: {generate(r'[A-Za-z0-9+/]{44}')}",
            f'secret_token := "{generate(r"[A-Za-z0-9]{24}")}"',
            f"passwd={generate(r'[A-Za-z0-9!#]{16}')}",
            f'apiKey: "{generate(r"[A-Za-z0-9]{39}")}"',
            f'creds = "{generate(r"[A-Za-z0-9-]{36}")}"',
        ],
        "database-password": [
            f"DB_PASSWORD={generate(r'[A-Za-z0-9!$?]{14}')}",
            f'database_password: "{generate(r"[A-Za-z0-9:;@]{16}")}"',
            f"pwd = {generate(r'[A-Za-z0-9]{12}')}",
        ],
    }
    return forms


def DETECT_SECRETS_FORMS(generate, per_rule):
    """Per detect-secrets plugin (detect_secrets/plugins/*.py), lines in the
    shapes each plugin's regexes describe, with generated values."""
    forms = {}

    def many(make):
        return [make() for _ in range(per_rule)]

    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    forms["AzureStorageKeyDetector"] = many(lambda: "DefaultEndpointsProtocol=https;AccountName=store;AccountKey="
                                            + generate(r"[a-zA-Z0-9+/]{86}==") + ";EndpointSuffix=core.windows.net")
    forms["BasicAuthDetector"] = many(lambda: "https://" + generate(r"[a-z]{6}") + ":"
                                      + generate(r"[A-Za-z0-9]{12}") + "@example.org/path") + \
        many(lambda: "mysql://root:" + generate(r"[A-Za-z0-9!]{10}") + "@db.internal:3306/app")
    forms["CloudantDetector"] = many(lambda: 'cloudant_password = "' + generate(r"[0-9a-f]{64}") + '"') + \
        many(lambda: "cl_api_key='" + generate(r"[a-z]{24}") + "'") + \
        many(lambda: "https://acct:" + generate(r"[0-9a-f]{64}") + "@acct.cloudant.com")
    forms["GitLabTokenDetector"] = many(lambda: generate(
        r"(glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-[0-9a-zA-Z_-]{20,50}")) + \
        many(lambda: "GR1348941" + generate(r"[0-9a-zA-Z_-]{20}"))
    forms["IbmCosHmacDetector"] = many(lambda: 'secret_access_key = "' + generate(r"[a-f0-9]{48}") + '"') + \
        many(lambda: "ibm_cos_secret_key: " + generate(r"[a-f0-9]{48}"))
    forms["JwtTokenDetector"] = many(lambda: generate(
        r"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9\.eyJzdWIiOiI[A-Za-z0-9_-]{20,60}\.[A-Za-z0-9_-]{43}"))
    forms["KeywordDetector"] = many(lambda: 'password = "' + generate(r"[A-Za-z0-9!@#%^&*]{14}") + '"') + \
        many(lambda: "api_key: " + generate(r"[A-Za-z0-9]{24}")) + \
        many(lambda: 'my_secret := "' + generate(r"[A-Za-z0-9]{18}") + '"') + \
        many(lambda: "if (password == '" + generate(r"[A-Za-z0-9]{12}") + "') {") + \
        many(lambda: "private_key '" + generate(r"[A-Za-z0-9]{20}") + "';") + \
        many(lambda: 'NSString *dbkey = @"' + generate(r"[A-Za-z0-9]{16}") + '";') + \
        many(lambda: 'appkey = "' + generate(r"[A-Za-z0-9]{20}") + '"') + \
        many(lambda: "keypass=" + generate(r"[A-Za-z0-9]{12}")) + \
        many(lambda: '"' + generate(r"[A-Za-z0-9]{14}") + '" == user_password') + \
        many(lambda: "contrasena = '" + generate(r"[A-Za-z0-9]{12}") + "'")
    forms["MailchimpDetector"] = many(lambda: generate(r"[0-9a-z]{32}-us[0-9]{1,2}"))
    forms["NpmDetector"] = many(lambda: "//registry.npmjs.org/:_authToken=npm_" + generate(r"[A-Za-z0-9]{36}")) + \
        many(lambda: "//registry.npmjs.org/:_authToken=" + generate(uuid))
    forms["OpenAIDetector"] = many(lambda: generate(r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"))
    forms["SendGridDetector"] = many(lambda: generate(r"SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43}"))
    forms["SlackDetector"] = many(lambda: generate(r"xox[abposr]-[0-9]{10,12}-[0-9]{10,12}-[a-z0-9]{24}")) + \
        many(lambda: "https://hooks.slack.com/services/T" + generate(r"[A-Z0-9]{8}") + "/B"
             + generate(r"[A-Z0-9]{8}") + "/" + generate(r"[a-zA-Z0-9]{24}"))
    forms["SoftlayerDetector"] = many(lambda: 'softlayer_api_key = "' + generate(r"[a-z0-9]{64}") + '"') + \
        many(lambda: "sl_pwd: " + generate(r"[a-z0-9]{64}")) + \
        many(lambda: "https://api.softlayer.com/soap/v3.1/" + generate(r"[a-z0-9]{64}"))
    forms["SquareOAuthDetector"] = many(lambda: generate(r"sq0csp-[0-9A-Za-z_-]{43}"))
    forms["TelegramBotTokenDetector"] = many(lambda: generate(r"[0-9]{8,10}:[0-9A-Za-z_-]{35}"))
    forms["Base64HighEntropyString"] = many(lambda: 'value = "' + generate(r"[A-Za-z0-9+/]{40}") + '"')
    forms["HexHighEntropyString"] = many(lambda: "'" + generate(r"[0-9a-f]{40}") + "'")
    return forms
